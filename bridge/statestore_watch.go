package bridge

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/statestore"
)

// KEYNOTIFY registrations live in the memory of the broker that owns the
// key's shard: in controller mode a new master has none of them, nor has
// a restarted broker, nor a broker that closed an idle connection of the
// front (it drops the registrations that came through it). The front
// therefore keeps, per connected client, the registrations a shard
// accepted, and registers them again when the router reports that a
// broker's master may have changed (router.Options.OnMasterChange: the
// route names another address, or the connection closed).
//
// A change the new master commits before the registration reaches it is
// not lost: each registration keeps a floor, the version from which the
// changes may not have reached the client (the shard's clock when it
// was registered, raised by every notification delivered for it), and is
// registered again with KEYNOTIFY ... SINCE <floor>, which replays the
// changes after it from the shard's change history (replicated state, the
// same on every replica). When the history no longer reaches back that
// far, an exact key's watch is registered afresh and the key read: a
// value newer than the floor is delivered as a SET notification (the
// intermediate changes collapse into it; a key deleted meanwhile gets no
// DELETE). A change may thus be notified twice around the switch, never
// silently dropped.

// ssWatchSet is one client's registrations that a shard accepted, with
// their floors.
type ssWatchSet struct {
	exact  map[string]statestore.HLC   // key -> floor
	prefix map[string][]statestore.HLC // prefix -> floor per global shard (len: the shard count)
}

func (ws *ssWatchSet) empty() bool { return len(ws.exact)+len(ws.prefix) == 0 }

// ssResyncRetry bounds the wait between attempts to register the watches
// of a broker again (the first ones come sooner).
const ssResyncRetry = time.Second

// ssResyncTimeout bounds one attempt (route lookup and registrations).
const ssResyncTimeout = 10 * time.Second

func maxHLC(a, b statestore.HLC) statestore.HLC {
	if b.Compare(a) > 0 {
		return b
	}
	return a
}

// noteWatch records the outcome of a client's KEYNOTIFY (not PREFIX): a
// registration the shard accepted with the shard's clock (the response's
// version, which is the front's and is cleared here so the client does not
// get it), or a STOP. A client that left meanwhile (clientGone) is not
// recorded.
func (f *StateStoreFront) noteWatch(clientID string, cmd *statestore.Command, resp *router.BrokerResponse, err error) {
	if err != nil || resp == nil {
		return
	}
	clock, _ := statestore.ParseHLC(resp.Version)
	resp.Version = ""
	accepted := len(resp.Reply) > 0 && resp.Reply[0] == '+'
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noteLocked(clientID, cmd, accepted, func([]statestore.HLC) []statestore.HLC { return nil }, clock)
}

// notePrefixWatch is noteWatch for a KEYNOTIFY ... PREFIX, answered by
// every shard (all, in shard order).
func (f *StateStoreFront) notePrefixWatch(clientID string, cmd *statestore.Command, all []*router.BrokerResponse) {
	accepted := true
	clocks := make([]statestore.HLC, len(all))
	for i, r := range all {
		accepted = accepted && len(r.Reply) > 0 && r.Reply[0] == '+'
		clocks[i], _ = statestore.ParseHLC(r.Version)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noteLocked(clientID, cmd, accepted, func(old []statestore.HLC) []statestore.HLC {
		if len(old) == len(clocks) {
			for i := range clocks {
				clocks[i] = maxHLC(clocks[i], old[i])
			}
		}
		return clocks
	}, statestore.HLC{})
}

// noteLocked records cmd's outcome; floors gives a prefix watch's floors
// from its old ones, clock is an exact watch's. Called with f.mu held.
func (f *StateStoreFront) noteLocked(clientID string, cmd *statestore.Command, accepted bool, floors func([]statestore.HLC) []statestore.HLC, clock statestore.HLC) {
	key := string(cmd.Key)
	ws := f.watches[clientID]
	if cmd.Stop {
		if ws != nil {
			if cmd.Prefix {
				delete(ws.prefix, key)
			} else {
				delete(ws.exact, key)
			}
			if ws.empty() {
				delete(f.watches, clientID)
			}
		}
		return
	}
	if !accepted || !f.watchers[clientID] {
		return
	}
	if ws == nil {
		ws = &ssWatchSet{exact: map[string]statestore.HLC{}, prefix: map[string][]statestore.HLC{}}
		f.watches[clientID] = ws
	}
	if cmd.Prefix {
		ws.prefix[key] = floors(ws.prefix[key])
	} else {
		ws.exact[key] = maxHLC(ws.exact[key], clock)
	}
}

// noteNotified raises the floors of the watches the notifications were
// delivered for (ns[i] carries versions[i]).
func (f *StateStoreFront) noteNotified(ns []router.BrokerNotification, versions []statestore.HLC) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watches) == 0 {
		return
	}
	for i, n := range ns {
		ws := f.watches[n.ClientID]
		if ws == nil {
			continue
		}
		v := versions[i]
		if fl, ok := ws.exact[string(n.Key)]; ok && v.Compare(fl) > 0 {
			ws.exact[string(n.Key)] = v
		}
		for p, floors := range ws.prefix {
			if len(floors) > 0 && bytes.HasPrefix(n.Key, []byte(p)) {
				s := statestore.ShardOf(n.Key, len(floors))
				floors[s] = maxHLC(floors[s], v)
			}
		}
	}
}

// masterChanged is router.Options.OnMasterChange: the watches registered
// on broker's shards are registered again, on a goroutine of the front's
// (one per broker at a time; a change noticed while it runs makes it run
// once more).
func (f *StateStoreFront) masterChanged(broker string) {
	f.mu.Lock()
	if len(f.watches) == 0 {
		f.mu.Unlock()
		return
	}
	gen, running := f.resyncs[broker]
	f.resyncs[broker] = gen + 1
	f.mu.Unlock()
	if running {
		return
	}
	if !f.group.Go(func() { f.resyncLoop(broker) }) {
		f.mu.Lock()
		delete(f.resyncs, broker)
		f.mu.Unlock()
	}
}

// resyncLoop registers the watches of broker's shards again until a pass
// succeeds after the last change noticed, or the front closes.
func (f *StateStoreFront) resyncLoop(broker string) {
	wait := 50 * time.Millisecond
	for {
		ok, gen := f.resyncOnce(broker)
		f.mu.Lock()
		if ok && f.resyncs[broker] == gen {
			delete(f.resyncs, broker)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		if ok {
			wait = 50 * time.Millisecond
			continue
		}
		select {
		case <-f.stop:
			f.mu.Lock()
			delete(f.resyncs, broker)
			f.mu.Unlock()
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, ssResyncRetry)
	}
}

// ssRewatch is one registration to make again.
type ssRewatch struct {
	client, key string
	prefix      bool
	shard       int
	since       statestore.HLC
}

// resyncOnce looks the route up and registers every watch on broker's
// shards there again. ok is false when something failed (try again
// later); gen is the change count the pass covers (read after the route).
func (f *StateStoreFront) resyncOnce(broker string) (ok bool, gen int) {
	ctx, cancel := context.WithTimeout(context.Background(), ssResyncTimeout)
	defer cancel()
	route, err := f.router.Route(ctx, true)
	f.mu.Lock()
	gen = f.resyncs[broker]
	f.mu.Unlock()
	if err != nil {
		f.log.Debug("state store: watches: route", "broker", broker, "err", err)
		return false, gen
	}
	var jobs []ssRewatch
	n := len(route)
	f.mu.Lock()
	for client, ws := range f.watches {
		for k, fl := range ws.exact {
			if s := statestore.ShardOf([]byte(k), n); route[s].Broker == broker {
				jobs = append(jobs, ssRewatch{client: client, key: k, shard: s, since: fl})
			}
		}
		for p, floors := range ws.prefix {
			for s := range route {
				if route[s].Broker != broker {
					continue
				}
				j := ssRewatch{client: client, key: p, prefix: true, shard: s}
				if len(floors) == n {
					j.since = floors[s]
				}
				jobs = append(jobs, j)
			}
		}
	}
	f.mu.Unlock()
	for _, j := range jobs {
		if route[j.shard].Addr == "" {
			return false, gen
		}
		if err := f.rewatch(ctx, route[j.shard], j); err != nil {
			f.log.Debug("state store: watch not registered again yet", "broker", broker, "client", j.client, "err", err)
			return false, gen
		}
	}
	if len(jobs) > 0 {
		f.log.Info("state store: watches registered again on a new master", "broker", broker, "watches", len(jobs), "addr", route[jobs[0].shard].Addr)
	}
	return true, gen
}

// rewatch registers one watch again at shard at, delivering what the
// client missed since its floor. An error means try again.
func (f *StateStoreFront) rewatch(ctx context.Context, at router.Shard, j ssRewatch) error {
	cmd := statestore.Command{Verb: statestore.VerbKeyNotify, Key: []byte(j.key), Prefix: j.prefix, Since: j.since}
	resp, err := f.invokeAt(ctx, at, j.client, &cmd)
	if err != nil {
		return err
	}
	tooOld := false
	if rv, derr := statestore.DecodeReply(resp.Reply); derr == nil && errors.Is(rv.Err(), statestore.ErrHistoryTooOld) {
		tooOld = true
		cmd.Since = statestore.HLC{}
		if resp, err = f.invokeAt(ctx, at, j.client, &cmd); err != nil {
			return err
		}
	}
	if len(resp.Reply) == 0 || resp.Reply[0] != '+' {
		// Refused for good (a quota): the client's watch is gone.
		f.log.Warn("state store: a watch could not be registered on the new master: dropped", "client", j.client, "key", j.key, "reply", string(resp.Reply))
		f.mu.Lock()
		if ws := f.watches[j.client]; ws != nil {
			if j.prefix {
				delete(ws.prefix, j.key)
			} else {
				delete(ws.exact, j.key)
			}
		}
		f.mu.Unlock()
		return nil
	}
	clock, _ := statestore.ParseHLC(resp.Version)
	missed := resp.Notifications
	if tooOld && j.prefix {
		f.log.Warn("state store: a prefix watch was registered again without the changes made during the master change (the change history no longer has them)", "client", j.client, "prefix", j.key)
	}
	if tooOld && !j.prefix {
		get := statestore.Command{Verb: statestore.VerbGet, Key: cmd.Key}
		gr, err := f.invokeAt(ctx, at, j.client, &get)
		if err != nil {
			return err
		}
		if rv, derr := statestore.DecodeReply(gr.Reply); derr == nil && rv.Kind == statestore.KindBulk {
			missed = []router.BrokerNotification{{ClientID: j.client, Key: cmd.Key, Op: uint8(statestore.OpSet), Value: rv.Str, Version: gr.Version}}
		}
	}
	// Deliver what is newer than what the client was sent (a live
	// notification may have overtaken this answer), then raise the floor.
	f.mu.Lock()
	ws := f.watches[j.client]
	still := false
	if ws != nil {
		if j.prefix {
			floors, ok := ws.prefix[j.key]
			still = ok
			if ok && j.shard < len(floors) {
				floors[j.shard] = maxHLC(floors[j.shard], clock)
			}
		} else {
			fl, ok := ws.exact[j.key]
			still = ok
			if ok {
				fresh := missed[:0:0]
				for _, n := range missed {
					if v, err := statestore.ParseHLC(n.Version); err == nil && v.Compare(fl) > 0 {
						fresh = append(fresh, n)
					}
				}
				missed = fresh
				ws.exact[j.key] = maxHLC(fl, clock)
			}
		}
	}
	f.mu.Unlock()
	if !still {
		// Stopped, or the client left, while this ran: undo.
		stop := statestore.Command{Verb: statestore.VerbKeyNotify, Key: cmd.Key, Prefix: j.prefix, Stop: true}
		_, err := f.invokeAt(ctx, at, j.client, &stop)
		return err
	}
	f.pushNotifications(missed)
	return nil
}

// invokeAt sends cmd for client to the shard at.
func (f *StateStoreFront) invokeAt(ctx context.Context, at router.Shard, client string, cmd *statestore.Command) (*router.BrokerResponse, error) {
	req := &router.BrokerRequest{ClientID: client, Payload: cmd.AppendRequest(nil)}
	return f.router.InvokeShard(ctx, at, cmd, req)
}
