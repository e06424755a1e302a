package mysql

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/google/uuid"
)

// gtidState is the GTID state of a binlog position: which transactions
// were written before it, in the flavour's own notation. It is a stream's
// resume token (committed in the destination's checkpoint beside the
// LSN) and what a stream resumed by GTID sends the server.
//
// MariaDB's is gtid_binlog_pos-like: the last GTID of each replication
// domain, "domain-server-seq[,…]". MySQL's is an executed set: per source
// uuid, the transaction numbers as intervals, "uuid:1-5:7-9[,…]".
type gtidState struct {
	flavor string
	maria  map[uint32]mariaGTID     // domain → its last GTID
	mysql  map[uuid.UUID][]interval // sorted, disjoint, not adjacent
}

type mariaGTID struct {
	server uint32
	seq    uint64
}

// interval is the transaction numbers [start, end] of one source uuid.
type interval struct{ start, end int64 }

func newGTIDState(flavor string) *gtidState {
	return &gtidState{flavor: flavor, maria: map[uint32]mariaGTID{}, mysql: map[uuid.UUID][]interval{}}
}

// parseGTIDState reads a state in the flavour's notation; empty text is the
// empty state. MySQL's may span lines, as the server prints gtid_executed.
func parseGTIDState(flavor, s string) (*gtidState, error) {
	g := newGTIDState(flavor)
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var err error
		if flavor == gomysql.MariaDBFlavor {
			err = g.parseMaria(part)
		} else {
			err = g.parseMySQL(part)
		}
		if err != nil {
			return nil, fmt.Errorf("GTID set %q: %w", s, err)
		}
	}
	return g, nil
}

func (g *gtidState) parseMaria(s string) error {
	f := strings.Split(s, "-")
	if len(f) != 3 {
		return fmt.Errorf("%q is not a MariaDB GTID (domain-server-sequence, like 0-1-42)", s)
	}
	domain, err1 := strconv.ParseUint(f[0], 10, 32)
	server, err2 := strconv.ParseUint(f[1], 10, 32)
	seq, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("%q is not a MariaDB GTID (domain-server-sequence, like 0-1-42)", s)
	}
	if _, dup := g.maria[uint32(domain)]; dup {
		return fmt.Errorf("domain %d appears twice (a position has one GTID per domain)", domain)
	}
	g.maria[uint32(domain)] = mariaGTID{server: uint32(server), seq: seq}
	return nil
}

func (g *gtidState) parseMySQL(s string) error {
	f := strings.Split(s, ":")
	u, err := uuid.Parse(strings.TrimSpace(f[0]))
	if err != nil || len(f) < 2 {
		return fmt.Errorf("%q is not a MySQL GTID set (uuid:1-5[:7-9], like 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5)", s)
	}
	for _, iv := range f[1:] {
		lo, hi, ok := strings.Cut(strings.TrimSpace(iv), "-")
		if !ok {
			hi = lo
		}
		start, err1 := strconv.ParseInt(lo, 10, 64)
		end, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil || start < 1 || end < start || end == 1<<63-1 {
			return fmt.Errorf("%q: interval %q is not N or N-M with 1 ≤ N ≤ M", s, iv)
		}
		g.addRange(u, start, end)
	}
	return nil
}

// add records one transaction's GTID as the binlog reader meets it:
// "0-1-42" on MariaDB, "uuid:23" on MySQL. The empty GTID (a server that
// writes none) changes nothing.
func (g *gtidState) add(gtid string) error {
	if gtid == "" {
		return nil
	}
	if g.flavor == gomysql.MariaDBFlavor {
		one := newGTIDState(g.flavor)
		if err := one.parseMaria(gtid); err != nil {
			return err
		}
		for d, v := range one.maria {
			g.maria[d] = v // the binlog's order: the last one of a domain is its position
		}
		return nil
	}
	return g.parseMySQL(gtid)
}

func (g *gtidState) addRange(u uuid.UUID, start, end int64) {
	ivs := append(g.mysql[u], interval{start, end})
	slices.SortFunc(ivs, func(a, b interval) int {
		if a.start != b.start {
			return int(min(max(a.start-b.start, -1), 1))
		}
		return int(min(max(a.end-b.end, -1), 1))
	})
	merged := ivs[:1]
	for _, iv := range ivs[1:] {
		last := &merged[len(merged)-1]
		if iv.start <= last.end+1 {
			last.end = max(last.end, iv.end)
			continue
		}
		merged = append(merged, iv)
	}
	g.mysql[u] = merged
}

// String writes the state in the flavour's notation, domains and uuids in
// ascending order: equal states write equal text.
func (g *gtidState) String() string {
	if g == nil {
		return ""
	}
	var parts []string
	if g.flavor == gomysql.MariaDBFlavor {
		domains := make([]uint32, 0, len(g.maria))
		for d := range g.maria {
			domains = append(domains, d)
		}
		slices.Sort(domains)
		for _, d := range domains {
			v := g.maria[d]
			parts = append(parts, fmt.Sprintf("%d-%d-%d", d, v.server, v.seq))
		}
		return strings.Join(parts, ",")
	}
	ids := make([]uuid.UUID, 0, len(g.mysql))
	for u := range g.mysql {
		ids = append(ids, u)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	for _, u := range ids {
		var b strings.Builder
		b.WriteString(u.String())
		for _, iv := range g.mysql[u] {
			if iv.start == iv.end {
				fmt.Fprintf(&b, ":%d", iv.start)
			} else {
				fmt.Fprintf(&b, ":%d-%d", iv.start, iv.end)
			}
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ",")
}

// contains reports whether every transaction of o is in g (MySQL), or g is
// at or past o in every domain o has (MariaDB).
func (g *gtidState) contains(o *gtidState) bool {
	for d, v := range o.maria {
		if w, ok := g.maria[d]; !ok || w.seq < v.seq {
			return false
		}
	}
	for u, ivs := range o.mysql {
		for _, iv := range ivs {
			if !slices.ContainsFunc(g.mysql[u], func(w interval) bool { return w.start <= iv.start && iv.end <= w.end }) {
				return false
			}
		}
	}
	return true
}

// syncSet is the state as go-mysql's dump request takes it.
func (g *gtidState) syncSet() (gomysql.GTIDSet, error) {
	if g.flavor == gomysql.MariaDBFlavor {
		return gomysql.ParseMariadbGTIDSet(g.String())
	}
	return gomysql.ParseMysqlGTIDSet(g.String())
}
