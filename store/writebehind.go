package store

import (
	"fmt"
	"net/netip"
	"time"
)

// Write-behind: the puts a broker answers asynchronously and that wait for
// no flush (PutAsync in FlushAsync mode, or with wait false) are not
// written one by one. The writer encodes each record into the
// write-behind buffer (commitLog.pend) and returns; the dispatcher, which
// every put wakes anyway, writes the whole buffer with one pwrite at the
// start of its round and answers the puts it covered, then dispatches
// them. A put is answered only once its record is in the page cache, as
// a put copied into the mapping is: an answered record survives the
// process, never only the machine (that takes a flush, as before).
//
// What this saves against copying each record into the mapping
// (AsyncWriteMapped, and the single puts of AsyncWriteHybrid before): a
// write fault on every fresh page of the segment (or the prefaulter's
// MADV_POPULATE_WRITE, which reads the fallocated page as zeros first),
// and at every flush the write-protection of each dirty page with a TLB
// shootdown, which msync needs and an fdatasync of pwritten pages does
// not. Against a pwrite per put (AsyncWritePwrite before): the syscall
// per record. Measured on ext4 (BenchmarkStorePutCPU): see
// docs/performance-broker.md.
//
// Lock order: answerMu, then putMu (answerMu is taken by the dispatcher
// and by Close only).

//
// Who drains. A put made with PutAsync wakes the dispatcher, whose round
// drains. A caller that puts in batches (a connection's reader serving
// the requests of one read, a poller serving one epoll round) makes them
// with PutAsyncDeferred, which wakes nobody, and calls Drain once the
// batch is made: the buffer is written and the puts are answered on the
// caller's goroutine, so an answer to the caller's own peer can leave with
// the batch's other answers in one write, and the dispatcher is not woken
// for the pwrite and the answers (a goroutine wake-up, often of the other
// CPU's thread, per batch). Drain then dispatches the committed records
// itself unless the dispatcher is doing so (it is woken then). Any
// goroutine may drain: answerMu serialises the drains, and a drain that
// finds another under way wakes the dispatcher, whose next round covers
// what the other drain took too early to see.

// PutDone is told once, later, how a put made with PutAsyncDeferred
// ended: what PutAsync's done would be told.
type PutDone interface {
	PutDone(res PutResult, err error)
}

// PutTally (Options.PutTally) lets the caller count its puts written
// behind a round at a time, as the store counts its own: a round calls
// Count for each of its stored puts, then Flush once, and only then
// answers them (PutDone), so a putter that reads the caller's counters
// after its answer finds its put counted. The calls are made with the
// store's answering lock held: one round at a time, never two at once,
// so the tally needs no lock of its own; they must not block or call
// into the store. Puts answered otherwise (not written behind, failed,
// or waiting for a flush) are not shown to the tally.
type PutTally interface {
	// Count is told of one stored put: its done and latency.
	Count(done PutDone, latency time.Duration)
	// Flush ends the round's count.
	Flush()
}

// putFunc is PutAsync's done as a PutDone.
type putFunc func(PutResult, error)

func (f putFunc) PutDone(res PutResult, err error) { f(res, err) }

// behindPut is a put written behind and not answered yet: what its
// answer needs and no more (72 bytes, not a PutResult and an appended of
// 160). The put writes one into behind under putMu and the drain reads it
// back on another goroutine, often the other CPU: each byte is a store
// and a load on a line the other side touched last. Its PutResult is made
// when it is answered (result); the rest of one is the store's
// (StoreHost) or fixed for a single put written behind (Status PutOK,
// MsgCount 1).
type behindPut struct {
	start, end int64 // its record's bytes in the log
	gen        int64 // pend's discard generation it was appended after (discardLog)
	queueOff   int64
	storeTs    int64         // ms
	began      time.Duration // monoNow at PutAsync
	done       PutDone
	// discarded and stored are answerWrittenLocked's verdict: the put's
	// records were taken back, or are written.
	discarded, stored bool
}

// result is the PutResult of b, stored, with its latency.
func (b *behindPut) result(host netip.AddrPort, latency time.Duration) PutResult {
	return PutResult{Status: PutOK, PhysicalOffset: b.start, QueueOffset: b.queueOff, WroteBytes: int(b.end - b.start),
		StoreTimestamp: b.storeTs, MsgCount: 1, StoreHost: host, Latency: latency}
}

// Drain writes out the write-behind buffer, answers the puts it covered
// (their done runs on the calling goroutine) and dispatches what is
// committed (consume queues, arrival listeners, the index), as
// a round of the dispatcher would. A caller of PutAsyncDeferred calls it
// once its batch of puts is made, whatever became of them; it must not
// hold a lock that a done callback takes. When another drain or a
// dispatch is under way it does not wait: it wakes the dispatcher, whose
// next round does the rest.
func (s *Store) Drain() {
	if !s.answerMu.TryLock() {
		s.wakeDispatcher()
		return
	}
	s.answerWrittenLocked()
	s.answerMu.Unlock()
	if !s.dispMu.TryLock() {
		s.wakeDispatcher()
		return
	}
	if s.disp.closed {
		// Close dispatches what it will itself and releases the files.
		s.dispMu.Unlock()
		return
	}
	s.dispatchLocked()
}

// answerWritten writes out the write-behind buffer and answers every put
// whose record it covered: PutOK once the record is written, or the
// failure when the records were taken back (full disk) or the write
// failed.
func (s *Store) answerWritten() {
	s.answerMu.Lock()
	defer s.answerMu.Unlock()
	s.answerWrittenLocked()
}

// answerWrittenLocked is answerWritten with answerMu held.
func (s *Store) answerWrittenLocked() {
	s.putMu.Lock()
	if len(s.behind) == 0 {
		s.putMu.Unlock()
		return
	}
	err := s.cl.writePendLocked()
	// Every put in behind has its record in what was just written, or
	// written earlier by another drain, or taken back or lost: none is
	// left for a later round.
	s.answering, s.behind = s.behind, s.answering[:0]
	s.putMu.Unlock()
	if err != nil && !isNoSpace(err) {
		s.setWriteErr(err)
	}
	committed := s.cl.committed.Load()
	now := monoNow() // one clock read for the round's puts
	// The round's stored puts are counted first, with one add per
	// counter (not three atomics a put on lines the other readers
	// write too), and before any is answered: a sender that reads the
	// stats after its answer finds its put counted.
	var batch putTally
	tally := s.opts.PutTally
	for i := range s.answering {
		p := &s.answering[i]
		p.discarded = s.cl.discards.discarded(p.gen, p.start)
		p.stored = !p.discarded && p.end <= committed
		if p.stored {
			batch.add(1, int(p.end-p.start), now-p.began)
			if tally != nil {
				tally.Count(p.done, now-p.began)
			}
		}
	}
	s.stats.recordTally(&batch)
	if tally != nil && batch.msgs > 0 {
		tally.Flush()
	}
	host := s.opts.StoreHost
	for i := range s.answering {
		p := &s.answering[i]
		switch {
		case p.discarded:
			s.stats.putErrors.Add(1)
			p.done.PutDone(PutResult{Status: PutServiceNotAvailable}, s.notStored())
		case p.stored:
			p.done.PutDone(p.result(host, now-p.began), nil)
		default:
			// Dropped by a failed write (the error is sticky), or cut
			// off by a Truncate (a demoted master) before it was
			// answered.
			s.stats.putErrors.Add(1)
			e := s.Err()
			if e == nil {
				e = fmt.Errorf("store: record at %d truncated before it was answered", p.start)
			}
			p.done.PutDone(PutResult{Status: PutServiceNotAvailable}, e)
		}
		s.answering[i] = behindPut{}
	}
	s.answering = s.answering[:0]
}
