package pg

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
)

// leastPrivilege warns when the source user is a superuser, or may become
// one (SET ROLE to a superuser role it is a member of): every read tidemark
// runs, a backfill's filter included, then runs with every right on the
// server, files and programs of the server's operating system user
// included. The fix lists the grants tidemark needs instead (README):
// REPLICATION, USAGE and SELECT on the tables, CREATE on the database (or a
// publication made for it), and ownership of the tables, which PostgreSQL
// requires to add them to a publication.
func (src *sourceCheck) leastPrivilege(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	name := src.name("least privilege")
	var super bool
	var db string
	var via []string // superuser roles the user is a member of
	err := src.conn.QueryRow(ctx, `
		SELECT r.rolsuper, current_database()::text,
		       COALESCE((SELECT array_agg(s.rolname::text ORDER BY s.rolname) FROM pg_roles s
		                 WHERE s.rolsuper AND s.oid <> r.oid AND pg_has_role(r.oid, s.oid, 'MEMBER')), '{}')
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&super, &db, &via)
	if err != nil {
		return fail(name, "cannot read the user's attributes: "+errText(err), "")
	}
	switch {
	case super:
		role := "tidemark"
		first := fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION PASSWORD '…';  -- a user of its own for tidemark, then use it in %s.source.dsn", ident(role), src.key)
		if src.user == role {
			first = fmt.Sprintf("ALTER ROLE %s NOSUPERUSER REPLICATION;", ident(role))
		}
		return warn(name, fmt.Sprintf("%s is a superuser: every read tidemark runs on the source, a backfill's filter included, has every right on the server (its files and programs too); tidemark needs only the grants below", src.user),
			strings.Join(append([]string{first}, src.minimalGrants(role, db)...), "\n"))
	case len(via) > 0:
		fixes := []string{fmt.Sprintf("REVOKE %s FROM %s;", strings.Join(idents(via), ", "), ident(src.user))}
		if src.s.Source.PublicationMode != config.PublicationExisting {
			fixes = append(fixes, src.ownership(src.user, func(t tableInfo) bool { return slices.Contains(via, t.owner) })...)
		}
		return warn(name, fmt.Sprintf("%s is a member of the superuser role %s, so it can SET ROLE to it and have every right on the server: a member of the tables' owning role is enough, if that role is no superuser",
			src.user, strings.Join(via, ", ")), strings.Join(fixes, "\n"))
	}
	return ok(name, src.user+" is not a superuser and cannot become one")
}

// minimalGrants are the grants that let role run the stream: CREATE on the
// database, USAGE and SELECT on the included tables, and their ownership.
func (src *sourceCheck) minimalGrants(role, db string) []string {
	pub := src.s.Source.Publication
	if src.s.Source.PublicationMode == config.PublicationExisting {
		// The DBA's publication is used as it is: nothing is created, and
		// no table is added to it, so no ownership is needed.
		all := make([]tableInfo, len(src.tables))
		for i, t := range src.tables {
			all[i] = tableInfo{id: t.id}
		}
		return strings.Split(cmp.Or(grantSelect(all, role), fmt.Sprintf("-- USAGE on the schemas and SELECT on every included table, to %s", ident(role))), "\n")
	}
	lines := []string{fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s;  -- or create publication %s yourself and ALTER PUBLICATION %s OWNER TO %s;",
		ident(db), ident(role), ident(pub), ident(pub), ident(role))}
	if src.tables == nil {
		return append(lines, fmt.Sprintf("-- and USAGE on the schemas, SELECT on and ownership of every included table, to %s", ident(role)))
	}
	all := make([]tableInfo, len(src.tables))
	for i, t := range src.tables {
		all[i] = tableInfo{id: t.id}
	}
	if g := grantSelect(all, role); g != "" {
		lines = append(lines, strings.Split(g, "\n")...)
	}
	return append(lines, src.ownership(role, func(tableInfo) bool { return true })...)
}

// ownership gives role the tables that need it: membership in an owning
// role that is no superuser, else the tables themselves.
func (src *sourceCheck) ownership(role string, needs func(tableInfo) bool) []string {
	var owners []string
	var owned []change.TableID
	for _, t := range src.published {
		switch {
		case !needs(t):
		case t.ownerSuper:
			owned = append(owned, t.id)
		case !slices.Contains(owners, t.owner):
			owners = append(owners, t.owner)
		}
	}
	var lines []string
	for _, o := range owners {
		lines = append(lines, fmt.Sprintf("GRANT %s TO %s;  -- the tables' owner: only a table's owner may add it to a publication", ident(o), ident(role)))
	}
	for _, id := range owned {
		lines = append(lines, fmt.Sprintf("ALTER TABLE %s OWNER TO %s;  -- owned by a superuser now: only a table's owner may add it to a publication", table(id), ident(role)))
	}
	return lines
}

func idents(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = ident(n)
	}
	return out
}
