package bridge

import (
	"slices"
	"time"
)

// retryOweMarker writes rec, a will-owed marker whose write failed, again
// until it is stored, for as long as this process owes the will (its
// publish is tried again) and runs: without it, the client's next records
// from this node (a new connection, a handoff, a delete) settle the will
// on every node's tail, and a crash of this node loses it. The server
// does not wait for it (its first try again and the session's records go
// on). A marker stored after the will went out and was settled would owe
// it again on the tails, and a later crash of this node would publish it
// twice: the settlement is written again after it then.
func (b *Backend) retryOweMarker(rec *sessionRecord) {
	b.goOwned(func() {
		wait := 50 * time.Millisecond
		for {
			if !b.sleep(wait) {
				return
			}
			if !b.owes(rec.ClientID, rec.WillDone) {
				return // published (and settled) meanwhile
			}
			err := b.writeMarker(b.ctx, rec)
			if err == nil {
				if !b.owes(rec.ClientID, rec.WillDone) {
					settle := &sessionRecord{ClientID: rec.ClientID, Node: b.opts.NodeID, WillDone: rec.WillDone}
					if err := b.writeMarker(b.ctx, settle); err != nil {
						b.log.Warn("bridge: settle a published will after its late will-owed marker", "client", rec.ClientID, "err", err)
					}
				}
				return
			}
			wait = min(2*wait, time.Second)
		}
	})
}

// owes reports whether this process owes the will id of clientID.
func (b *Backend) owes(clientID, id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.ContainsFunc(b.wills.owing[clientID], func(r willRef) bool { return r.id == id })
}
