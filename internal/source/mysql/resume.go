package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// resumePlan is how a stream resumes from a checkpoint.
type resumePlan struct {
	byGTID bool
	epoch  uint8
	state  *gtidState // the GTID state at the start; nil when not known yet
}

// PlanResume decides how a stream resumes from a checkpoint, and makes its
// epoch the one of every position the Source reports from now on (chunks
// included). With a GTID state and a server that writes GTIDs (MariaDB
// always, MySQL with gtid_mode=ON) it resumes by GTID. If the server's
// binlog is numbered differently from the checkpoint's (another server,
// after a failover), the positions move to the next epoch, so that they
// order after every position of the old numbering.
//
// The numbering is the same when the server's binlog has, at the
// checkpoint's file and offset, the checkpoint's GTID state: MariaDB's
// BINLOG_GTID_POS tells. MySQL has no such function: the numbering is
// taken as the same when the server has the checkpoint's binlog file and
// it reaches the offset (see docs/mysql.md for what that misses).
func (s *Source) PlanResume(ctx context.Context, from Resume) (resumePlan, error) {
	// BINLOG_GTID_POS reads the binlog file up to the offset: the plan
	// ResumeFrom made is the one Stream then uses.
	s.planMu.Lock()
	defer s.planMu.Unlock()
	if s.planned != nil && s.planned.from == from {
		return s.planned.plan.copy(), nil
	}
	plan, err := s.planResume(ctx, from)
	if err != nil {
		return resumePlan{}, err
	}
	s.planned = &plannedResume{from: from, plan: plan.copy()}
	return plan, nil
}

// plannedResume is the last resume planned, and what for.
type plannedResume struct {
	from Resume
	plan resumePlan
}

// copy is the plan with a state of its own: a stream adds to its state.
func (p resumePlan) copy() resumePlan {
	if p.state != nil {
		st, _ := parseGTIDState(p.state.flavor, p.state.String())
		p.state = st
	}
	return p
}

func (s *Source) planResume(ctx context.Context, from Resume) (resumePlan, error) {
	plan := resumePlan{epoch: epochOf(from.Position)}
	if from.GTIDs == "" || from.Position == 0 {
		s.epoch.Store(uint32(plan.epoch))
		return plan, nil
	}
	err := s.with(ctx, func(c *client.Conn) error {
		flavor, base, err := flavorAndBase(c)
		if err != nil {
			return err
		}
		if plan.state, err = parseGTIDState(flavor, from.GTIDs); err != nil {
			return &source.PermanentError{Err: fmt.Errorf("the checkpoint's resume token: %w", err),
				Hint: "the destination's checkpoint was written for a " + otherFlavor(flavor) + " server; point the stream back at it, or run `tidemark stream reset`"}
		}
		if plan.byGTID, err = writesGTIDs(c, flavor); err != nil || !plan.byGTID {
			return err
		}
		same, err := sameNumbering(c, flavor, FileName(base, from.Position), uint32(from.Position), plan.state)
		if err != nil || same {
			return err
		}
		if plan.epoch == 0xFF {
			return &source.PermanentError{Err: fmt.Errorf("the stream resumed on a differently numbered binlog 255 times"),
				Hint: "run `tidemark stream reset` to number its positions afresh"}
		}
		plan.epoch++
		s.log().Info("the server's binlog is numbered differently from the checkpoint's: resuming by GTID in a new position epoch",
			"checkpoint", FormatPosition(base, from.Position), "gtid", plan.state.String(), "epoch", plan.epoch)
		return nil
	})
	if err != nil {
		return resumePlan{}, fmt.Errorf("plan the resume from %s: %w", formatPosition(from.Position), err)
	}
	s.epoch.Store(uint32(plan.epoch))
	return plan, nil
}

// Epoch is the epoch of the positions the Source reports.
func (s *Source) Epoch() uint8 { return uint8(s.epoch.Load()) }

func otherFlavor(flavor string) string {
	if flavor == gomysql.MariaDBFlavor {
		return "MySQL"
	}
	return "MariaDB"
}

func flavorAndBase(c *client.Conn) (flavor, base string, err error) {
	r, err := query(c, "SELECT @@version, @@log_bin_basename")
	if err != nil {
		return "", "", err
	}
	flavor = gomysql.MySQLFlavor
	if strings.Contains(strings.ToLower(getString(r, 0, 0)), "mariadb") {
		flavor = gomysql.MariaDBFlavor
	}
	base = getString(r, 0, 1)
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	return flavor, base, nil
}

// writesGTIDs: MariaDB always does; MySQL with gtid_mode=ON.
func writesGTIDs(c *client.Conn, flavor string) (bool, error) {
	if flavor == gomysql.MariaDBFlavor {
		return true, nil
	}
	r, err := query(c, "SELECT @@GLOBAL.gtid_mode")
	if err != nil {
		return false, err
	}
	return strings.EqualFold(getString(r, 0, 0), "ON"), nil
}

// sameNumbering reports whether the server's binlog at file:offset is where
// the checkpoint with GTID state st was taken.
func sameNumbering(c *client.Conn, flavor, file string, offset uint32, st *gtidState) (bool, error) {
	if flavor == gomysql.MariaDBFlavor {
		at, err := binlogGTIDPos(c, file, offset)
		return err == nil && at != nil && at.String() == st.String(), err
	}
	logs, err := binaryLogs(c)
	if err != nil {
		return false, err
	}
	for _, l := range logs {
		if l.name == file {
			return int64(offset) <= l.size, nil
		}
	}
	return false, nil
}

// binlogGTIDPos is MariaDB's GTID state at file:offset; nil when the
// server does not have that file.
func binlogGTIDPos(c *client.Conn, file string, offset uint32) (*gtidState, error) {
	r, err := c.Execute("SELECT BINLOG_GTID_POS(?, ?)", file, offset)
	if err != nil {
		return nil, fmt.Errorf("BINLOG_GTID_POS(%s, %d): %w", file, offset, err)
	}
	if r.RowNumber() == 0 {
		return nil, nil
	}
	if v, _ := r.GetValue(0, 0); v == nil {
		return nil, nil
	}
	return parseGTIDState(gomysql.MariaDBFlavor, getString(r, 0, 0))
}

// gtidStateAt is the GTID state at a binlog position a stream starts from
// by file and offset: MariaDB's BINLOG_GTID_POS; on MySQL gtid_executed
// when the start is the binlog's current end or the end PinStart read
// (each read with it), else unknown (nil): such a MySQL stream resumes by
// file and offset until it restarts from a checkpoint that has a state.
func (s *Source) gtidStateAt(ctx context.Context, info binlogInfo, start change.LSN) (*gtidState, error) {
	if info.flavor != gomysql.MariaDBFlavor {
		s.pinMu.Lock()
		pinned := s.pinned
		s.pinMu.Unlock()
		for _, at := range []binlogInfo{info, pinned} {
			if start == at.current && at.executed != "" {
				return parseGTIDState(info.flavor, at.executed)
			}
		}
		return nil, nil
	}
	var st *gtidState
	err := s.with(ctx, func(c *client.Conn) (err error) {
		st, err = binlogGTIDPos(c, FileName(info.base, start), uint32(start))
		return err
	})
	return st, err
}

// gtidPurged says why the server can no longer send what follows the GTID
// state token, or "" when it can: MariaDB keeps no binlog from before the
// state (its oldest file starts past it in some domain), MySQL purged
// transactions the state lacks (gtid_purged is not within it).
func (s *Source) gtidPurged(ctx context.Context, token string) (string, error) {
	var why string
	err := s.with(ctx, func(c *client.Conn) error {
		flavor, _, err := flavorAndBase(c)
		if err != nil {
			return err
		}
		st, err := parseGTIDState(flavor, token)
		if err != nil {
			return err
		}
		var oldest *gtidState
		if flavor == gomysql.MariaDBFlavor {
			logs, err := binaryLogs(c)
			if err != nil || len(logs) == 0 {
				return err
			}
			if oldest, err = binlogGTIDPos(c, logs[0].name, 4); err != nil || oldest == nil {
				return err
			}
		} else {
			r, err := query(c, "SELECT @@GLOBAL.gtid_purged")
			if err != nil {
				return err
			}
			if oldest, err = parseGTIDState(flavor, getString(r, 0, 0)); err != nil {
				return err
			}
		}
		if !st.contains(oldest) {
			why = fmt.Sprintf("the binlog after GTID %s, where the stream was, was purged; the server's oldest binlog starts at GTID %s", st, oldest)
		}
		return nil
	})
	return why, err
}
