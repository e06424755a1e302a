package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
)

// A publication a DBA made (publication_mode: existing) is used as it is:
// tidemark neither creates nor alters it, so it must already carry every
// change of every streamed table. pubProblems says what it lacks that
// would lose changes silently, each with its fix; start-up refuses such a
// publication and doctor fails it.

// pubState is what the server says of a publication.
type pubState struct {
	exists                           bool
	allTables                        bool
	insert, update, delete, truncate bool
	viaRoot                          bool
	schemas                          []string // FOR TABLES IN SCHEMA
	published                        map[change.TableID]bool
	filtered, columnLists            []string // tables with a row filter, a column list
}

func readPubState(ctx context.Context, q queryer, pub string) (pubState, error) {
	var st pubState
	err := q.QueryRow(ctx, `
		SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot
		FROM pg_publication WHERE pubname = $1`, pub).
		Scan(&st.allTables, &st.insert, &st.update, &st.delete, &st.truncate, &st.viaRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("look up publication %s: %w", pub, err)
	}
	st.exists = true
	st.published = map[change.TableID]bool{}
	rows, err := q.Query(ctx, `SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1`, pub)
	if err != nil {
		return st, fmt.Errorf("list the tables of publication %s: %w", pub, err)
	}
	for rows.Next() {
		var id change.TableID
		if err := rows.Scan(&id.Schema, &id.Name); err != nil {
			rows.Close()
			return st, err
		}
		st.published[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("list the tables of publication %s: %w", pub, err)
	}
	var version int
	if err := q.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return st, err
	}
	if version < 150000 {
		return st, nil // row filters, column lists and schemas came with 15
	}
	rows, err = q.Query(ctx, `
		SELECT format('%I.%I', n.nspname, c.relname), pr.prqual IS NOT NULL, pr.prattrs IS NOT NULL
		FROM pg_publication_rel pr
		JOIN pg_publication p ON p.oid = pr.prpubid
		JOIN pg_class c ON c.oid = pr.prrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE p.pubname = $1 AND (pr.prqual IS NOT NULL OR pr.prattrs IS NOT NULL)
		ORDER BY 1`, pub)
	if err != nil {
		return st, fmt.Errorf("read the row filters of publication %s: %w", pub, err)
	}
	for rows.Next() {
		var name string
		var filter, cols bool
		if err := rows.Scan(&name, &filter, &cols); err != nil {
			rows.Close()
			return st, err
		}
		if filter {
			st.filtered = append(st.filtered, name)
		}
		if cols {
			st.columnLists = append(st.columnLists, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, err
	}
	err = q.QueryRow(ctx, `
		SELECT coalesce(array_agg(n.nspname::text ORDER BY n.nspname), '{}')
		FROM pg_publication_namespace pn
		JOIN pg_publication p ON p.oid = pn.pnpubid
		JOIN pg_namespace n ON n.oid = pn.pnnspid
		WHERE p.pubname = $1`, pub).Scan(&st.schemas)
	return st, err
}

// pubProblems are what publication pub lacks to carry every change of
// tables, and the fixes; partitioned names the tables among them that are
// partitioned.
func pubProblems(pub string, st pubState, tables []change.TableID, partitioned map[change.TableID]bool) (problems, fixes []string) {
	name := ident(pub)
	if !st.exists {
		create := "CREATE PUBLICATION " + name + " FOR TABLE " + tableList(tables) + " WITH (publish_via_partition_root = true);"
		if len(tables) == 0 {
			create = "CREATE PUBLICATION " + name + " WITH (publish_via_partition_root = true);"
		}
		return []string{fmt.Sprintf("publication %s does not exist, and publication_mode existing leaves creating it to you", pub)},
			[]string{create + "  -- or set publication_mode: managed and tidemark creates it"}
	}
	var missingOps []string
	for _, op := range []struct {
		on   bool
		name string
	}{{st.insert, "insert"}, {st.update, "update"}, {st.delete, "delete"}, {st.truncate, "truncate"}} {
		if !op.on {
			missingOps = append(missingOps, op.name)
		}
	}
	if len(missingOps) > 0 {
		problems = append(problems, fmt.Sprintf("publication %s does not publish %s, so those changes would never reach the destination", pub, strings.Join(missingOps, ", ")))
		fixes = append(fixes, "ALTER PUBLICATION "+name+" SET (publish = 'insert, update, delete, truncate');")
	}
	if len(st.filtered) > 0 || len(st.columnLists) > 0 {
		var what []string
		if len(st.filtered) > 0 {
			what = append(what, "row filters on "+list(st.filtered, 5))
		}
		if len(st.columnLists) > 0 {
			what = append(what, "column lists on "+list(st.columnLists, 5))
		}
		problems = append(problems, fmt.Sprintf("publication %s has %s: the changes it leaves out would be missing from the destination", pub, strings.Join(what, " and ")))
		fixes = append(fixes, "ALTER PUBLICATION "+name+" SET TABLE …;  -- name each table without WHERE (…) and without a column list")
	}
	var parts []string
	for _, id := range tables {
		if partitioned[id] {
			parts = append(parts, id.String())
		}
	}
	if !st.viaRoot && len(parts) > 0 {
		problems = append(problems, fmt.Sprintf("publication %s publishes partitions under their own names (publish_via_partition_root is off), so the changes of %s would reach no object", pub, list(parts, 5)))
		fixes = append(fixes, "ALTER PUBLICATION "+name+" SET (publish_via_partition_root = true);")
	}
	var missing []change.TableID
	for _, id := range tables {
		if !st.published[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, id := range missing {
			names[i] = id.String()
		}
		problems = append(problems, fmt.Sprintf("publication %s lacks %d of the tables to stream (%s), whose changes would be lost", pub, len(missing), list(names, 5)))
		fixes = append(fixes, "ALTER PUBLICATION "+name+" ADD TABLE "+tableList(missing)+";  -- or exclude them from the stream")
	}
	return problems, fixes
}

// futureTables says whether tables created later join the publication by
// themselves, which only FOR ALL TABLES and FOR TABLES IN SCHEMA do.
func (st pubState) futureTables() string {
	switch {
	case st.allTables:
		return "it is FOR ALL TABLES, so tables created later join it"
	case len(st.schemas) > 0:
		return "tables created later in " + strings.Join(st.schemas, ", ") + " join it (FOR TABLES IN SCHEMA); tables in other schemas must be added by hand"
	}
	return "tables created later do not join it: add them with ALTER PUBLICATION … ADD TABLE, or use FOR ALL TABLES or FOR TABLES IN SCHEMA"
}

func tableList(ids []change.TableID) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = quoteTable(id)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// checkPublication refuses, as a permanent error, a DBA's publication that
// would lose changes of tables.
func (s *Source) checkPublication(ctx context.Context, tables []change.TableID) error {
	var st pubState
	partitioned := map[change.TableID]bool{}
	err := s.read(ctx, func(q queryer) error {
		var err error
		if st, err = readPubState(ctx, q, s.cfg.Publication); err != nil {
			return err
		}
		partitioned, err = partitionedTables(ctx, q)
		return err
	})
	if err != nil {
		return classify(err)
	}
	problems, fixes := pubProblems(s.cfg.Publication, st, tables, partitioned)
	if len(problems) == 0 {
		return nil
	}
	return &PermanentError{Err: errors.New(strings.Join(problems, "; ")), Hint: strings.Join(fixes, " ")}
}

// partitionedTables are the source's partitioned tables.
func partitionedTables(ctx context.Context, q queryer) (map[change.TableID]bool, error) {
	rows, err := q.Query(ctx, `
		SELECT n.nspname::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'p'`)
	if err != nil {
		return nil, fmt.Errorf("list partitioned tables: %w", err)
	}
	out := map[change.TableID]bool{}
	for rows.Next() {
		var id change.TableID
		if err := rows.Scan(&id.Schema, &id.Name); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = true
	}
	rows.Close()
	return out, rows.Err()
}
