package doctor

import (
	"fmt"
	"syscall"
)

// Free space below either bound warns.
const (
	minFreeBytes   = 1 << 30 // 1 GiB
	minFreePercent = 5
)

// diskSpace checks the free space of the filesystem holding dir.
func diskSpace(name, dir string) Check {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return warn(name, fmt.Sprintf("cannot read the free space of %s: %s", dir, errText(err)), "")
	}
	bsize := uint64(st.Bsize)
	return diskCheck(name, dir, st.Bavail*bsize, st.Blocks*bsize)
}

// diskCheck judges free space: WARN under 1 GiB or 5% of the filesystem.
func diskCheck(name, dir string, avail, total uint64) Check {
	pct := 100.0
	if total > 0 {
		pct = float64(avail) * 100 / float64(total)
	}
	detail := fmt.Sprintf("%s free on the filesystem of %s (%.0f%% of %s)", BytesText(int64(avail)), dir, pct, BytesText(int64(total)))
	if avail < minFreeBytes || pct < minFreePercent {
		return warn(name, detail+fmt.Sprintf("; below %s or %d%%", BytesText(minFreeBytes), minFreePercent),
			"free space on that filesystem, or move the file to a larger one (and change the path in the configuration)")
	}
	return ok(name, detail)
}
