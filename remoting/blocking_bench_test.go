package remoting

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// BenchmarkRemotingBlockingPool: a pool processor that blocks for 1 ms (a
// sync flush) with callers pipelining on one connection. Ideal rate:
// callers per millisecond ("ideal-ratio" = rate / that).
func BenchmarkRemotingBlockingPool(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s, err := NewServer(Options{Addr: "127.0.0.1:0"})
			if err != nil {
				b.Fatal(err)
			}
			s.RegisterWith(codeEcho, PoolSend, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
				time.Sleep(time.Millisecond)
				return echo(c, req)
			}), RegisterOptions{NoRetain: true})
			if err := s.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			c, err := NewClient(ClientOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			addr := s.Addr().String()
			b.ResetTimer()
			d := runCallers(b, b.N, callers, func(g int) error {
				resp, err := c.Invoke(context.Background(), addr, benchRequest(128))
				if err == nil && len(resp.Body) != 128 {
					err = fmt.Errorf("short body %d", len(resp.Body))
				}
				return err
			})
			rate := float64(b.N) / d.Seconds()
			b.ReportMetric(rate, "rpc/s")
			b.ReportMetric(rate/(float64(callers)*1000), "ideal-ratio")
		})
	}
}
