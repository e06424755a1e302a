package mysql

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
)

// A binlog position travels as a change.LSN: the binlog file's numeric
// suffix in bits 32-55, the byte offset in the file in the low 32
// (max_binlog_size is at most 1 GiB, so an offset always fits). Positions
// so encoded order like the binlog: files in sequence, offsets within one.
//
// The top 8 bits are the position's epoch: how many times the stream
// resumed by GTID on a server whose binlog is numbered differently from
// the one its checkpoint was taken on (a failover). A new epoch orders
// every position of the new numbering after the old one's.
const (
	epochShift = 56
	maxFileSeq = 1<<(epochShift-32) - 1
)

// Position encodes a binlog file name and offset as an LSN.
func Position(file string, offset uint32) (change.LSN, error) {
	i := strings.LastIndexByte(file, '.')
	if i < 0 || i == len(file)-1 {
		return 0, fmt.Errorf("binlog file name %q has no numeric suffix (like mysql-bin.000003)", file)
	}
	seq, err := strconv.ParseUint(file[i+1:], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("binlog file name %q has no numeric suffix (like mysql-bin.000003): %w", file, err)
	}
	if seq > maxFileSeq {
		return 0, fmt.Errorf("binlog file name %q: tidemark reads files numbered up to %d; run RESET MASTER on a server no replica reads from, or reset the stream", file, maxFileSeq)
	}
	return change.LSN(seq<<32 | uint64(offset)), nil
}

// epochOf is the epoch of a position (see above).
func epochOf(l change.LSN) uint8 { return uint8(l >> epochShift) }

// inEpoch is the binlog position l (epoch bits clear) in epoch e.
func inEpoch(l change.LSN, e uint8) change.LSN {
	return binlogPos(l) | change.LSN(e)<<epochShift
}

// binlogPos is l without its epoch: the server's file and offset.
func binlogPos(l change.LSN) change.LSN { return l &^ (0xFF << epochShift) }

// FormatPosition writes an LSN as "base.NNNNNN:offset" for a person, with
// base the binlog's base name (log_bin_basename's last element, like
// "mysql-bin"). The suffix has at least six digits, as the server writes it.
// A position of a later epoch says so: "mysql-bin.000003:1234 (epoch 1)".
func FormatPosition(base string, l change.LSN) string {
	s := fmt.Sprintf("%s:%d", FileName(base, l), uint32(l))
	if e := epochOf(l); e > 0 {
		s += fmt.Sprintf(" (epoch %d)", e)
	}
	return s
}

// FileName is the binlog file an LSN falls in.
func FileName(base string, l change.LSN) string {
	return fmt.Sprintf("%s.%06d", base, uint32(binlogPos(l)>>32))
}

// ParsePosition reads "mysql-bin.000003:1234" and returns the base name
// ("mysql-bin") and the LSN.
func ParsePosition(s string) (base string, l change.LSN, err error) {
	file, off, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("binlog position %q: want file:offset, like mysql-bin.000003:1234", s)
	}
	offset, err := strconv.ParseUint(off, 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("binlog position %q: offset %q is not a number below 2^32", s, off)
	}
	if l, err = Position(file, uint32(offset)); err != nil {
		return "", 0, fmt.Errorf("binlog position %q: %w", s, err)
	}
	return file[:strings.LastIndexByte(file, '.')], l, nil
}
