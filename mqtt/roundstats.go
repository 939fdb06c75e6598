package mqtt

import "sync/atomic"

// A poller round's receive counters. The poller counts what it reads and
// the packets its inline handling decodes (readable, workInline,
// handlePublish: Stats.BytesReceived, PacketsReceived, Received,
// ReceivedQoS and the read(2) calls) in plain fields of its round, and
// folds them into the shared atomic counters before anything of the
// round can be written or handed on: before a connection's output is
// released (workInline, toWorker), before input goes to a worker, after
// an inline handler that answers later (its done may run at once on
// another goroutine), before a send to another client's connection
// (SendToRecycled), and before the round's deferred work runs (Flush, at
// its end). A client therefore does not see an answer whose request is
// not counted yet (one exception: an answer that alone passes the held
// output's limit, 64 KiB, is written during the handler's call, and its
// request is counted by the end of the round), and the readers of Stats (the $SYS
// tree, /metrics, the admin, tests) read the same fields as before; what
// they no longer pay is an atomic add per counter and packet (a GET's
// five of them: 125-182 ns for 11 such adds against 9-15 ns plain).
// Counts made off the poller (workers, TLS, resume) stay atomic adds.
type roundStats struct {
	dirty       bool
	reads       int64
	bytesIn     int64
	packetsIn   int64
	received    int64
	receivedQoS [3]int64
	packetsOut  int64
	sent        int64
	sentQoS     [3]int64
}

// fold adds the round's counts to the server's and clears them.
func (r *Round) fold() {
	st := &r.st
	if !st.dirty {
		return
	}
	s := r.srv
	if st.reads != 0 {
		s.io.reads.Add(st.reads)
	}
	if st.bytesIn != 0 {
		s.stats.BytesReceived.Add(st.bytesIn)
	}
	if st.packetsIn != 0 {
		s.stats.PacketsReceived.Add(st.packetsIn)
	}
	addByQoS(&s.stats.Received, &s.stats.ReceivedQoS, st.received, &st.receivedQoS)
	if st.packetsOut != 0 {
		s.stats.PacketsSent.Add(st.packetsOut)
	}
	addByQoS(&s.stats.Sent, &s.stats.SentQoS, st.sent, &st.sentQoS)
	*st = roundStats{}
}

// addByQoS adds n messages, byQoS of them at each QoS, to total and perQoS.
func addByQoS(total *atomic.Int64, perQoS *[3]atomic.Int64, n int64, byQoS *[3]int64) {
	if n == 0 {
		return
	}
	total.Add(n)
	for q, k := range byQoS {
		if k != 0 {
			perQoS[q].Add(k)
		}
	}
}
