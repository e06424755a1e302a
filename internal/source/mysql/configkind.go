package mysql

import (
	"hash/fnv"
	"net/url"
	"strings"

	"github.com/tidemark/tidemark/internal/config"
)

// checkDSN checks a MySQL source's DSN without ever repeating it.
func checkDSN(v *config.Checker, path, dsn string) {
	const fix = "write mysql://user:password@host:3306/dbname, percent-encoding special characters (e.g. @ as %40)"
	u, err := url.Parse(dsn) // its error would repeat dsn: never show it
	switch {
	case dsn == "":
		v.Add(path, "missing: give the source database as a mysql:// URL")
	case !strings.HasPrefix(dsn, "mysql://") || err != nil:
		v.Add(path, "not a mysql:// URL: %s", fix)
	case strings.Trim(u.Path, "/") == "":
		v.Add(path, "names no database: %s", fix)
	default:
		v.Port(path, dsn, 3306)
	}
}

// DerivedServerID is the replica server id of a MySQL source whose
// configuration names none: a hash of the stream's name in
// 1073741824..2147483647, a range replicas set up by hand rarely use, so
// that two streams never share one (a server drops the older of two
// replicas with the same id).
func DerivedServerID(stream string) uint32 {
	h := fnv.New32a()
	h.Write([]byte("tidemark stream " + stream))
	return h.Sum32()&0x3FFFFFFF | 0x40000000
}
