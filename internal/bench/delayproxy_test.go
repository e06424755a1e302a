package bench

import (
	"net"
	"sync"
	"time"
)

// delayProxy stands for a destination far away: it forwards TCP
// connections to target, holding what goes either way for half of rtt, so
// that a round trip through it takes rtt longer. Data stays in order and
// is not throttled (what is in flight is simply late), as over a long
// link. Only the benchmark's own loopback connections go through it.
type delayProxy struct {
	ln     net.Listener
	target string
	half   time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn // both ends of every connection, until Close
	closed bool
}

func startDelayProxy(target string, rtt time.Duration) (*delayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target, half: rtt / 2}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, ends the connections and waits for their
// copies to end.
func (p *delayProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *delayProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed { // accepted as Close ran: it would not end them
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(s, c) })
		p.wg.Go(func() { p.forward(c, s) })
	}
}

// piece is data read at a time, to be written half later.
type piece struct {
	data []byte
	due  time.Time
}

// forward copies src to dst, each piece half after it was read; at src's
// end it closes both (the other direction's copy then ends too).
func (p *delayProxy) forward(dst, src net.Conn) {
	pieces := make(chan piece, 1024)
	var writer sync.WaitGroup
	writer.Go(func() {
		for pc := range pieces {
			time.Sleep(time.Until(pc.due))
			if _, err := dst.Write(pc.data); err != nil {
				break
			}
		}
		for range pieces { // drain after a failed write
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			pieces <- piece{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.half)}
		}
		if err != nil {
			break // its end, or a reset: the connection is over either way
		}
	}
	close(pieces)
	writer.Wait()
	dst.Close()
	src.Close()
}
