//go:build !unix

package cli

// termWidth is the terminal's width in columns, or 0 when unknown.
func termWidth(uintptr) int { return 0 }
