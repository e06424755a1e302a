package change

import (
	"encoding/hex"
	"fmt"
	"testing"
)

// TestFormatBytes: the hex text built in pieces equals the whole value's
// hex, at sizes around the pieces' edges (256 bytes) and past a MiB.
func TestFormatBytes(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 257, 511, 512, 513, 1000, 1<<20 + 3} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i>>8)
		}
		got, want := FormatBytes(b), `\x`+hex.EncodeToString(b)
		if got != want {
			t.Fatalf("%d bytes: %.40q…, want %.40q…", n, got, want)
		}
		if err := Canonical(TagBytes, got); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

// BenchmarkFormatBytes: a value's hex text (one allocation; `\x` +
// hex.EncodeToString made three, 2026-12-05: 448 -> 208-240 ns at 64
// bytes, 36 -> 20-22 ms at 16 MiB).
func BenchmarkFormatBytes(b *testing.B) {
	for _, size := range []int{64, 16 << 20} {
		v := make([]byte, size)
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for range b.N {
				_ = FormatBytes(v)
			}
		})
	}
}
