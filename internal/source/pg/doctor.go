package pg

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/source"
)

// sourceCheck is what the checks of one stream's source share: the connection
// and what the earlier checks learnt.
type sourceCheck struct {
	s    *config.Stream
	key  string // the stream's configuration key, "streams[i]"
	conn *pgx.Conn
	user string // current_user
	// tables are the included tables with the user's privileges on them;
	// nil when they could not be listed.
	tables []tableInfo
	// published are the tables tidemark would put in the publication: the
	// included ones with a usable key.
	published []tableInfo
	// described are the published tables' shapes; generatedKeys the tables
	// left out because a key column is generated.
	described     []*change.Table
	generatedKeys []string
}

type tableInfo struct {
	id    change.TableID
	usage bool // USAGE on the schema
	read  bool // SELECT on the table
	owned bool // the user is, or is a member of, the owner
	owner string
	// ownerSuper: the owner is a superuser, whose membership no one
	// should be given.
	ownerSuper bool
}

// doctor runs the checks of a stream's PostgreSQL source: the server's
// settings, the user's privileges, the tables and their keys, the
// publication, the replication slot and the WAL it retains, the clock.
func doctor(ctx context.Context, in source.DoctorInput) []Check {
	src := &sourceCheck{s: in.Stream, key: in.Key}
	conn, err := connect(ctx, in.Stream.Source.DSN)
	if err != nil {
		return []Check{fail(src.name("source"), errText(err)+" (the source's other checks were skipped)",
			connectFix(err, src.key+".source.dsn"))}
	}
	defer closeConn(conn)
	src.conn = conn
	out := []Check{src.reachable(ctx)}
	for _, check := range []func(context.Context) Check{
		src.walLevel, src.role, src.listTables, src.selectPrivilege, src.keys, src.generated, src.publication,
		src.leastPrivilege, src.slotsRoom, src.walSendersRoom,
	} {
		out = append(out, check(ctx))
	}
	out = append(out, src.slot(ctx, checkpoint{known: in.Checkpoint.Known, position: in.Checkpoint.Position})...)
	return append(out, src.clock(ctx))
}

func (src *sourceCheck) name(what string) string { return "stream " + src.s.Name + ": " + what }

func (src *sourceCheck) reachable(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var version string
	err := src.conn.QueryRow(ctx, "SELECT current_user, current_setting('server_version')").Scan(&src.user, &version)
	if err != nil {
		return fail(src.name("source"), "connected, but cannot query: "+errText(err), connectFix(err, src.key+".source.dsn"))
	}
	return ok(src.name("source"), fmt.Sprintf("connected to %s (PostgreSQL %s)", where(src.conn.Config()), version))
}

func (src *sourceCheck) walLevel(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var level string
	if err := src.conn.QueryRow(ctx, "SELECT current_setting('wal_level')").Scan(&level); err != nil {
		return fail(src.name("wal_level"), "cannot read wal_level: "+errText(err), "")
	}
	if level != "logical" {
		return fail(src.name("wal_level"), fmt.Sprintf("wal_level is %s; logical replication needs logical", level),
			"ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL (wal_level takes effect only at server start)")
	}
	return ok(src.name("wal_level"), "wal_level is logical")
}

func (src *sourceCheck) role(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var super, repl, rds bool
	// Amazon RDS grants replication through membership in rds_replication.
	err := src.conn.QueryRow(ctx, `
		SELECT r.rolsuper, r.rolreplication,
		       CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_replication')
		            THEN pg_has_role('rds_replication', 'MEMBER') ELSE false END
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&super, &repl, &rds)
	if err != nil {
		return fail(src.name("replication privilege"), "cannot read the user's attributes: "+errText(err), "")
	}
	switch {
	case super:
		return ok(src.name("replication privilege"), src.user+" is a superuser")
	case repl:
		return ok(src.name("replication privilege"), src.user+" has REPLICATION")
	case rds:
		return ok(src.name("replication privilege"), src.user+" is a member of rds_replication")
	}
	return fail(src.name("replication privilege"), src.user+" has neither REPLICATION nor superuser, so it cannot create or read a replication slot",
		fmt.Sprintf("ALTER ROLE %s REPLICATION; (run by an administrator; on Amazon RDS: GRANT rds_replication TO %s;)", ident(src.user), ident(src.user)))
}

// listTables finds the included tables and the user's privileges on them.
func (src *sourceCheck) listTables(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	all, err := ListTables(ctx, src.conn)
	if err != nil {
		return fail(src.name("tables"), errText(err), "")
	}
	var schemas, names []string
	for _, id := range all {
		if src.s.Includes(id) {
			schemas, names = append(schemas, id.Schema), append(names, id.Name)
		}
	}
	rows, err := src.conn.Query(ctx, `
		SELECT x.s, x.t, has_schema_privilege(n.oid, 'USAGE'), has_table_privilege(c.oid, 'SELECT'),
		       pg_has_role(c.relowner, 'USAGE'), pg_get_userbyid(c.relowner)::text,
		       COALESCE((SELECT o.rolsuper FROM pg_roles o WHERE o.oid = c.relowner), false)
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(s, t, i)
		JOIN pg_namespace n ON n.nspname = x.s
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = x.t
		ORDER BY x.i`, schemas, names)
	if err == nil {
		src.tables, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (tableInfo, error) {
			var t tableInfo
			err := r.Scan(&t.id.Schema, &t.id.Name, &t.usage, &t.read, &t.owned, &t.owner, &t.ownerSuper)
			return t, err
		})
	}
	if err != nil {
		src.tables = nil
		return fail(src.name("tables"), "cannot read table privileges: "+errText(err), "")
	}
	if src.tables == nil {
		src.tables = []tableInfo{}
	}
	if len(src.tables) == 0 {
		fix := fmt.Sprintf("check %s.include and %s.exclude against the source's tables", src.key, src.key)
		if len(all) > 0 {
			fix += " (for example " + list(tableNames(all), 5) + ")"
		}
		detail := fmt.Sprintf("none of the source's %d tables matches the stream's include and exclude patterns", len(all))
		if src.s.IncludeFutureTables {
			detail += "; matching tables created later will be added"
		}
		return warn(src.name("tables"), detail, fix)
	}
	ids := make([]change.TableID, len(src.tables))
	for i, t := range src.tables {
		ids[i] = t.id
	}
	return ok(src.name("tables"), fmt.Sprintf("%d %s include/exclude: %s", len(ids), plural(len(ids), "table matches", "tables match"), list(tableNames(ids), 10)))
}

func (src *sourceCheck) selectPrivilege(context.Context) Check {
	name := src.name("select privilege")
	if src.tables == nil {
		return fail(name, "not checked: the tables could not be listed", "")
	}
	var missing []tableInfo
	for _, t := range src.tables {
		if !t.usage || !t.read {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return ok(name, fmt.Sprintf("%s may read the %d included %s", src.user, len(src.tables), plural(len(src.tables), "table", "tables")))
	}
	ids := make([]change.TableID, len(missing))
	for i, t := range missing {
		ids[i] = t.id
	}
	return fail(name, fmt.Sprintf("%s cannot read %d of the included tables: %s", src.user, len(missing), list(tableNames(ids), 10)),
		grantSelect(missing, src.user))
}

// grantSelect renders the grants that let user read the tables: USAGE on
// their schemas and SELECT on them, or on all tables of a schema when many
// of its tables are missing.
func grantSelect(missing []tableInfo, user string) string {
	var order []string
	bySchema := map[string][]tableInfo{}
	for _, t := range missing {
		if _, seen := bySchema[t.id.Schema]; !seen {
			order = append(order, t.id.Schema)
		}
		bySchema[t.id.Schema] = append(bySchema[t.id.Schema], t)
	}
	var lines []string
	for _, schema := range order {
		ts := bySchema[schema]
		if !ts[0].usage {
			lines = append(lines, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s;", ident(schema), ident(user)))
		}
		var names []string
		for _, t := range ts {
			if !t.read {
				names = append(names, table(t.id))
			}
		}
		switch {
		case len(names) > 10:
			lines = append(lines, fmt.Sprintf("GRANT SELECT ON ALL TABLES IN SCHEMA %s TO %s;", ident(schema), ident(user)))
		case len(names) > 0:
			lines = append(lines, fmt.Sprintf("GRANT SELECT ON %s TO %s;", strings.Join(names, ", "), ident(user)))
		}
	}
	return strings.Join(lines, "\n")
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func table(id change.TableID) string { return pgx.Identifier{id.Schema, id.Name}.Sanitize() }

func tableNames(ids []change.TableID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
