package remoting

import "time"

// PoolStats is the load of one worker pool of a server (what RocketMQ's
// broker reports as its thread-pool queue size, capacity and head wait).
type PoolStats struct {
	Pool     Pool
	Workers  int // requests of the pool that may run at once
	Capacity int // requests that may wait (PoolOptions.QueueSize)
	Queued   int // requests waiting for a worker now
	Running  int // requests being served now
	// HeadWait is how long the oldest waiting request has waited, 0 when
	// none waits. It is measured from the later of the queueing of the
	// last request a worker took and of the request that found the queue
	// empty, so it may exceed the true wait by the gap between two
	// arrivals, never fall short of it.
	HeadWait time.Duration
}

// PoolStats returns the load of pool p.
func (s *Server) PoolStats(p Pool) PoolStats {
	if p >= numPools {
		p = PoolDefault
	}
	wp := s.mux.pools[p]
	st := PoolStats{Pool: p, Workers: wp.n, Capacity: wp.size, Queued: int(wp.pending.Load()), Running: int(wp.busy.Load())}
	if st.Queued > 0 {
		since := max(wp.lastTakenAt.Load(), wp.firstAt.Load())
		if since > 0 {
			st.HeadWait = max(0, time.Duration(monoNanos()-since))
		}
	}
	return st
}

// monoBase anchors monoNanos: time.Since reads the monotonic clock.
var monoBase = time.Now()

// monoNanos is a monotonic timestamp in nanoseconds (never 0 once the
// process has run a nanosecond).
func monoNanos() int64 { return int64(time.Since(monoBase)) + 1 }
