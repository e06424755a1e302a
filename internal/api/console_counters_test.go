package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestConsoleCountersWithStatus: while a backfill of 3,000 rows commits
// chunk after chunk, every state of its row on the Objects tab (as a
// MutationObserver sees each render) shows Events 7d and Loaded 7d
// counting at least the rows the status says were written; the row never
// shows "completed, 3,000 rows" beside an older count. The same on the
// object's page for a second backfill.
func TestConsoleCountersWithStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual, chunk_size: 250}", setup: `
		CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3000) i`})
	b := newBrowser(t, e)
	b.open("#/streams/"+e.name, `tr[data-object="public.t"]`)
	b.waitJS(`document.getElementById("live").dataset.state === "live"`)
	// Each render of the row, as the user sees it: status, events 7d,
	// loaded 7d and the rows the progress cell says were written.
	jsValue[bool](b, `(() => {
		window.seen = [];
		const tbody = document.querySelector("table.sk-objtable tbody");
		const snap = () => {
			const row = tbody.querySelector('tr[data-object="public.t"]');
			if (!row) return;
			const run = row.cells[9].textContent;
			const written = (/([\d,]+) written/.exec(run) || /^([\d,]+) rows/.exec(run) || [])[1];
			window.seen.push({status: row.dataset.status, events: row.cells[4].textContent, loaded: row.cells[5].textContent, written: written || "", run});
		};
		new MutationObserver(snap).observe(tbody, {subtree: true, childList: true, characterData: true, attributes: true});
		return true;
	})()`)
	e.initiate(201, `{"objects": ["public.t"], "rows_per_second": 1000}`)
	b.waitJS(objectStatus("public.t") + ` === "completed" && ` + objectRow("public.t") + `.cells[4].textContent === "3,000" && ` +
		objectRow("public.t") + `.cells[3].textContent === "yes"`)
	b.shot("console-counters-completed")

	var seen []struct{ Status, Events, Loaded, Written, Run string }
	if err := json.Unmarshal([]byte(jsValue[string](b, `JSON.stringify(window.seen)`)), &seen); err != nil {
		t.Fatal(err)
	}
	n := func(s string) int {
		v, _ := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		return v
	}
	writtens := map[int]bool{}
	for _, s := range seen {
		if s.Written == "" {
			continue
		}
		writtens[n(s.Written)] = true
		if n(s.Events) < n(s.Written) || n(s.Loaded) < n(s.Written) {
			t.Errorf("the row showed %s with %s written beside Events 7d %s, Loaded 7d %s (%q)", s.Status, s.Written, s.Events, s.Loaded, s.Run)
		}
	}
	if len(writtens) < 3 {
		t.Errorf("the row showed only %d distinct figures of rows written (%v): the backfill was not followed live", len(writtens), writtens)
	}
	t.Logf("%d renders of the row, %d distinct figures of rows written", len(seen), len(writtens))

	// The object's page: its Events 7d beside the newest run's Written
	// while a second backfill writes the 3,000 rows again.
	b.open("#/streams/"+e.name+"/objects/public.t", `tbody tr[data-backfill]`)
	jsValue[bool](b, `(() => {
		window.seen = [];
		const snap = () => {
			const row = document.querySelector("tbody tr[data-backfill]");
			const fact = [...document.querySelectorAll(".sk-fact")].find((f) => f.querySelector(".k")?.textContent === "Events 7d");
			if (!row || !fact || row.dataset.backfill === "`+strconv.FormatInt(e.backfills("stream=" + e.name)[0].ID, 10)+`") return;
			window.seen.push({status: row.dataset.status, events: fact.querySelector(".v").textContent, written: row.cells[10].textContent});
		};
		new MutationObserver(snap).observe(document.getElementById("main"), {subtree: true, childList: true, characterData: true});
		return true;
	})()`)
	e.initiate(201, `{"objects": ["public.t"], "rows_per_second": 1000}`)
	b.waitJS(`document.querySelector("tbody tr[data-backfill]")?.dataset.status === "completed" && window.seen.some((s) => s.events === "6,000")`)
	var page []struct{ Status, Events, Written string }
	if err := json.Unmarshal([]byte(jsValue[string](b, `JSON.stringify(window.seen)`)), &page); err != nil {
		t.Fatal(err)
	}
	writtens = map[int]bool{}
	for _, s := range page {
		writtens[n(s.Written)] = true
		if n(s.Events)-3000 < n(s.Written) {
			t.Errorf("the object's page showed the run %s with %s written beside Events 7d %s (3,000 from the first run)", s.Status, s.Written, s.Events)
		}
	}
	if len(writtens) < 3 {
		t.Errorf("the object's page showed only %d distinct figures of rows written (%v)", len(writtens), writtens)
	}
}
