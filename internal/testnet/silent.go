package testnet

import (
	"net"
	"testing"
)

// Silent listens on a loopback port that accepts connections and reads
// whatever comes but never answers: a peer that hangs (a stopped or cut
// off broker). It returns the address; the listener and its connections
// close at the test's cleanup, which waits for their goroutines.
func Silent(t testing.TB) string {
	t.Helper()
	return serve(t, "127.0.0.1:0", func(g *connGroup, c net.Conn) {
		g.goOwned(func() {
			buf := make([]byte, 4096)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		})
	})
}
