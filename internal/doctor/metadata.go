package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
)

// checkMetadata opens the metadata store and reads its schema version. A
// SQLite file that does not exist yet is not created: its directory must
// be writable.
func checkMetadata(ctx context.Context, cfg *config.Config) []Check {
	const name = "metadata store"
	var out []Check
	url := cfg.Metadata
	path, isSQLite := cfg.MetadataSQLite()
	shown := url
	if isSQLite {
		shown = path
		dir := filepath.Dir(path)
		if c, good := writableDir(name, "metadata", dir); !good {
			return []Check{c}
		}
		disk := diskSpace("metadata disk", dir)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return []Check{ok(name, fmt.Sprintf("%s does not exist yet: tidemark run creates it (directory %s is writable)", path, dir)), disk}
		}
		out = append(out, disk)
	} else if cc, err := pgConfig(url); err == nil {
		shown = where(cc)
	} else {
		return []Check{fail(name, err.Error(), connectFix(errBadDSN, "metadata"))}
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	st, err := store.Open(ctx, url)
	if err != nil {
		fix := "correct metadata (or TIDEMARK_METADATA)"
		if !isSQLite {
			fix = connectFix(err, "metadata")
		}
		return append([]Check{fail(name, errText(err), fix)}, out...)
	}
	defer st.Close()
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		return append([]Check{fail(name, fmt.Sprintf("%s opens, but: %s", shown, errText(err)), "")}, out...)
	}
	return append([]Check{ok(name, fmt.Sprintf("%s opens (%s, schema version %d)", shown, st.Dialect(), v))}, out...)
}
