package suggest_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/suggest"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	names := []string{"public.orders", "public.order_items", "public.customers", "sales.orders", "Public.Orders", "shop", "ship"}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"public.ordres", []string{"public.orders"}},
		{"shp", []string{"ship", "shop"}},
		{"nope", nil},
		{"public.custmers", []string{"public.customers"}},
		{"PUBLIC.ORDERS", []string{"Public.Orders", "public.orders"}},
		{"x", nil},
		{"public.orders", []string{"Public.Orders"}},
	} {
		if got := suggest.Closest(c.name, names); !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ordres", "orders", 2}} {
		if got := suggest.Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func ExampleHint() {
	fmt.Println("no object public.ordres in stream shop" + suggest.Hint(suggest.Closest("public.ordres", []string{"public.orders", "public.users"})))
	// Output: no object public.ordres in stream shop; did you mean public.orders?
}
