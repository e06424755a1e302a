package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
)

// publication checks that tidemark can create the publication, or set the
// tables of the existing one. Both CREATE PUBLICATION … FOR TABLE and ALTER
// PUBLICATION … SET TABLE need the user to own every table it names (or be
// a member of the owning role); the latter also needs it to own the
// publication, and creating one needs CREATE on the database.
func (src *sourceCheck) publication(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	name := src.name("publication")
	pub := src.s.Source.Publication
	if src.s.Source.PublicationMode == config.PublicationExisting {
		return src.existingPublication(ctx, name, pub)
	}
	var db string
	var canCreate bool
	if err := src.conn.QueryRow(ctx, "SELECT current_database()::text, has_database_privilege(current_database(), 'CREATE')").Scan(&db, &canCreate); err != nil {
		return fail(name, "cannot read the database's privileges: "+errText(err), "")
	}
	var allTables, owner bool
	var ownerName string
	var count int
	err := src.conn.QueryRow(ctx, `
		SELECT p.puballtables, pg_has_role(p.pubowner, 'USAGE'), pg_get_userbyid(p.pubowner)::text,
		       (SELECT count(*) FROM pg_publication_tables pt WHERE pt.pubname = p.pubname)::int
		FROM pg_publication p WHERE p.pubname = $1`, pub).Scan(&allTables, &owner, &ownerName, &count)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fail(name, fmt.Sprintf("cannot look up publication %s: %s", pub, errText(err)), "")
	}

	var problems, fixes []string
	n := len(src.published)
	switch {
	case !exists && !canCreate:
		problems = append(problems, fmt.Sprintf("publication %s does not exist and %s lacks CREATE on database %s, which creating it needs", pub, src.user, db))
		fixes = append(fixes, fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s;", ident(db), ident(src.user)))
	case exists && allTables && n > 0:
		problems = append(problems, fmt.Sprintf("publication %s is FOR ALL TABLES, and tidemark sets its tables with ALTER PUBLICATION … SET TABLE, which such a publication refuses", pub))
		fixes = append(fixes, fmt.Sprintf("set %s.source.publication to a name not in use, or DROP PUBLICATION %s; if nothing else uses it", src.key, ident(pub)))
	case exists && !owner && n > 0:
		problems = append(problems, fmt.Sprintf("publication %s belongs to %s, and only its owner may set its tables", pub, ownerName))
		fixes = append(fixes, fmt.Sprintf("ALTER PUBLICATION %s OWNER TO %s;", ident(pub), ident(src.user)))
	}
	var notOwned []string
	var owners []string
	for _, t := range src.published {
		if t.owned {
			continue
		}
		notOwned = append(notOwned, t.id.String())
		if !slices.Contains(owners, t.owner) {
			owners = append(owners, t.owner)
		}
	}
	if len(notOwned) > 0 {
		problems = append(problems, fmt.Sprintf("%s does not own %d of the tables to publish (%s), and PostgreSQL lets only a table's owner add it to a publication",
			src.user, len(notOwned), list(notOwned, 5)))
		for _, o := range owners {
			fixes = append(fixes, fmt.Sprintf("GRANT %s TO %s;  -- membership in the owning role is enough", ident(o), ident(src.user)))
		}
	}
	if len(problems) > 0 {
		return fail(name, strings.Join(problems, "; "), strings.Join(fixes, "\n"))
	}
	tables := fmt.Sprintf("%d %s", n, plural(n, "table", "tables"))
	switch {
	case !exists:
		return ok(name, fmt.Sprintf("publication %s does not exist yet: tidemark creates it at first start, with the %s to replicate", pub, tables))
	case n == 0:
		return ok(name, fmt.Sprintf("publication %s exists (%d %s); with no table to replicate, tidemark leaves it alone", pub, count, plural(count, "table", "tables")))
	}
	return ok(name, fmt.Sprintf("publication %s exists (%d %s); tidemark sets its tables to the %s to replicate", pub, count, plural(count, "table", "tables"), tables))
}

// existingPublication judges a publication a DBA made, which tidemark uses
// as it is (publication_mode: existing): it must carry every change of the
// tables to stream. Owning the tables is then not needed.
func (src *sourceCheck) existingPublication(ctx context.Context, name, pub string) Check {
	st, err := readPubState(ctx, src.conn, pub)
	if err != nil {
		return fail(name, "cannot read publication "+pub+": "+errText(err), "")
	}
	partitioned, err := partitionedTables(ctx, src.conn)
	if err != nil {
		return fail(name, errText(err), "")
	}
	ids := make([]change.TableID, len(src.published))
	for i, t := range src.published {
		ids[i] = t.id
	}
	if problems, fixes := pubProblems(pub, st, ids, partitioned); len(problems) > 0 {
		return fail(name, strings.Join(problems, "; "), strings.Join(fixes, "\n"))
	}
	n := len(ids)
	return ok(name, fmt.Sprintf("publication %s (made by you, used as it is) carries every change of the %d %s to stream; %s",
		pub, n, plural(n, "table", "tables"), st.futureTables()))
}
