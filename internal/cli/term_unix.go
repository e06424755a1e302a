//go:build unix

package cli

import "golang.org/x/sys/unix"

// termWidth is the terminal's width in columns, or 0 when unknown.
func termWidth(fd uintptr) int {
	ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
