package mqtt

import "sync"

// persistOrder orders the backend calls that persist one client id's
// session: SaveSession when a connection ends and DeleteSession when a
// session ends (DISCONNECT with Session Expiry 0, expiry, a clean
// start). Each such call is decided under the server's lock, but made
// after it is released; without an order, the save of a connection that
// ended first but reached the backend late was stored after the delete
// of the session a quick reconnect had resumed and ended, and the ended
// session came back at the next connect. A ticket is taken while the
// decision's lock is held; the call waits for every earlier ticket of
// the same client id to be done. Uncontended, a ticket costs two lock
// pairs of this order's own mutex, never the server's.
type persistOrder struct {
	mu    sync.Mutex
	turns map[string]*persistTurn // protected by mu; only ids with a ticket out
}

// persistTurn is one client id's queue of persisting calls.
type persistTurn struct {
	next, done uint64        // tickets handed out, tickets done
	wake       chan struct{} // closed when done moves on; nil until someone waits
}

// persistTicket is one call's place in its client id's queue.
type persistTicket struct {
	id   string
	turn *persistTurn
	n    uint64
}

// take hands out id's next ticket. The caller holds the lock under which
// it decided the call (Server.mu), so tickets follow decisions.
func (o *persistOrder) take(id string) *persistTicket {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.turns[id]
	if t == nil {
		if o.turns == nil {
			o.turns = map[string]*persistTurn{}
		}
		t = &persistTurn{}
		o.turns[id] = t
	}
	tk := &persistTicket{id: id, turn: t, n: t.next}
	t.next++
	return tk
}

// wait returns when every ticket of the id taken before tk is done.
func (o *persistOrder) wait(tk *persistTicket) {
	for {
		o.mu.Lock()
		t := tk.turn
		if t.done == tk.n {
			o.mu.Unlock()
			return
		}
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		ch := t.wake
		o.mu.Unlock()
		<-ch
	}
}

// finish marks tk done, letting the id's next ticket go.
func (o *persistOrder) finish(tk *persistTicket) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := tk.turn
	t.done++
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
	if t.done == t.next {
		delete(o.turns, tk.id)
	}
}
