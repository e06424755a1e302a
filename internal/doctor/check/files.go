package check

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Free space below either bound warns.
const (
	minFreeBytes   = 1 << 30 // 1 GiB
	minFreePercent = 5
)

// DiskSpace checks the free space of the filesystem holding dir.
func DiskSpace(name, dir string) Check {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Warned(name, fmt.Sprintf("cannot read the free space of %s: %s", dir, ErrText(err)), "")
	}
	bsize := uint64(st.Bsize)
	return DiskCheck(name, dir, st.Bavail*bsize, st.Blocks*bsize)
}

// DiskCheck judges free space: WARN under 1 GiB or 5% of the filesystem.
func DiskCheck(name, dir string, avail, total uint64) Check {
	pct := 100.0
	if total > 0 {
		pct = float64(avail) * 100 / float64(total)
	}
	detail := fmt.Sprintf("%s free on the filesystem of %s (%.0f%% of %s)", BytesText(int64(avail)), dir, pct, BytesText(int64(total)))
	if avail < minFreeBytes || pct < minFreePercent {
		return Warned(name, detail+fmt.Sprintf("; below %s or %d%%", BytesText(minFreeBytes), minFreePercent),
			"free space on that filesystem, or move the file to a larger one (and change the path in the configuration)")
	}
	return Passed(name, detail)
}

// WritableDir checks that dir exists and that a file can be created in
// it; key is the configuration key of the path. ok is false with the
// failed check.
func WritableDir(name, key, dir string) (c Check, ok bool) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Failed(name, fmt.Sprintf("directory %s does not exist", dir), fmt.Sprintf("mkdir -p %s  (or correct %s)", dir, key)), false
	case err != nil:
		return Failed(name, ErrText(err), "correct "+key), false
	case !info.IsDir():
		return Failed(name, dir+" is not a directory", "correct "+key), false
	}
	f, err := os.CreateTemp(dir, ".tidemark-doctor-*")
	if err != nil {
		return Failed(name, fmt.Sprintf("directory %s is not writable: %s", dir, ErrText(err)),
			fmt.Sprintf("make %s writable by the user tidemark runs as (chown, chmod), or correct %s", dir, key)), false
	}
	f.Close()
	os.Remove(f.Name())
	return Check{}, true
}
