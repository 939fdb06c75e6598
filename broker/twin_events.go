package broker

import (
	"context"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/twin"
)

// Change events. Every event an applied entry yields becomes a message of
// the events topic, queue = the shard, in log order, with these
// properties (besides KEYS = the device id and TAGS = the operation type,
// so consumers can filter by tag):
//
//	opType                 updateTwin, replaceTwin, deviceConnected, ...
//	deviceId, moduleId     the twin (moduleId only for a module)
//	version, etag          the twin's after the change
//	iothub-message-schema  twinChangeNotification, ...
//	operationTimestamp     the entry's store time (ISO 8601, ms)
//	twinOffset             the entry's queue offset in the twin topic
//	twinEvent              i/n: the event's place among the entry's events
//
// They are produced right after the entry is applied, without waiting for
// their own flush; a snapshot is written only once the events of the
// entries it covers are flushed too. A master that restarts (or a slave
// restarted as master) reads the last event of each shard's queue and
// produces the events of the entries it replays after that one; a slave
// the controller promotes keeps the events of the last entries it applied
// and produces those past the last event stored when it takes over. So a
// crash between an entry and its events loses none: events are delivered
// at least once, in order per shard.
const (
	propTwinOffset = "twinOffset"
	propTwinEvent  = "twinEvent"
)

// eventsFloor sets which replayed entries of a restarting master must
// produce their events: those after the source of the last event stored
// in the shard's events queue (and the rest of that entry's events when
// only some were stored), never those inside the snapshot. Called before
// the replay, with the shard not yet shared.
func (t *Twins) eventsFloor(sh *twShard) {
	sh.emitFrom = sh.next // the replay starts here; the snapshot's entries had their events flushed
	off, i, n, ok := t.lastEvent(sh)
	if !ok {
		return
	}
	if off+1 > sh.emitFrom {
		sh.emitFrom = off + 1
	}
	if i+1 < n && off >= sh.next {
		sh.partialOff, sh.partialFrom = off, i+1
	}
}

// lastEvent returns the source of the last event in the shard's events
// queue: the entry's queue offset, the event's index among the entry's n
// events. ok is false when the queue is empty or its last message is not
// a twin event.
func (t *Twins) lastEvent(sh *twShard) (off int64, i, n int, ok bool) {
	st := t.b.store
	q := st.MaxOffset(t.opts.EventsTopic, sh.id)
	if q <= st.MinOffset(t.opts.EventsTopic, sh.id) {
		return 0, 0, 0, false
	}
	res, err := st.GetMessages(t.opts.EventsTopic, sh.id, q-1, 1, nil)
	if err != nil || len(res.Buffers) == 0 {
		if res != nil {
			res.Release()
		}
		t.log.Warn("twin events: last event unreadable", "shard", sh.id, "err", err)
		return 0, 0, 0, false
	}
	m, _, err := record.Decode(res.Buffers[0], false)
	res.Release()
	if err != nil {
		return 0, 0, 0, false
	}
	offProp, _ := record.LookupPropertyString(m.Properties, propTwinOffset)
	idxProp, _ := record.LookupPropertyString(m.Properties, propTwinEvent)
	off, err = strconv.ParseInt(offProp, 10, 64)
	i, n, ok = parseEventIndex(idxProp)
	return off, i, n, ok && err == nil
}

// takeOverLocked (controller mode, a promotion completing) produces the
// events of the last entries the old master applied but did not get to
// emit: those of the recent entries past the last event stored. Called
// with sh.mu held, before the host serves.
func (t *Twins) takeOverLocked(sh *twShard) {
	recent := sh.recent
	sh.recent = nil
	if t.opts.NoEvents || len(recent) == 0 {
		return
	}
	off, i, n, ok := t.lastEvent(sh)
	if ok && off+1 < recent[0].off {
		// Only if the old master fell behind by more than recentEntries.
		t.log.Warn("twin events of entries before the promotion were not produced", "shard", sh.id, "from", off+1, "to", recent[0].off-1)
	}
	for _, r := range recent {
		switch {
		case !ok || r.off > off:
			t.produceLocked(context.Background(), sh, r.events, r.off, 0)
		case r.off == off && i+1 < n:
			t.produceLocked(context.Background(), sh, r.events, r.off, i+1)
		}
	}
}

func parseEventIndex(s string) (i, n int, ok bool) {
	a, b, found := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	return i, n, found && err1 == nil && err2 == nil && i >= 0 && i < n
}

// emitLocked produces events[from:] of the entry at queue offset off to
// the events topic, queue sh.id. Called with sh.mu held. A failed put is
// logged (the store fails-stop on write errors; a restart produces the
// event again).
func (t *Twins) emitLocked(ctx context.Context, sh *twShard, events []twin.Event, off int64, from int) {
	if t.opts.NoEvents || t.host.slave.Load() {
		return
	}
	t.produceLocked(ctx, sh, events, off, from)
}

// produceLocked puts events[from:] into the events topic. Called with
// sh.mu held.
func (t *Twins) produceLocked(ctx context.Context, sh *twShard, events []twin.Event, off int64, from int) {
	for i := from; i < len(events); i++ {
		ev := &events[i]
		props := record.Properties{
			{Key: record.PropertyKeys, Value: ev.DeviceID},
			{Key: record.PropertyTags, Value: ev.OpType},
			{Key: "opType", Value: ev.OpType},
			{Key: "deviceId", Value: ev.DeviceID},
		}
		if ev.ModuleID != "" {
			props = append(props, record.Property{Key: "moduleId", Value: ev.ModuleID})
		}
		props = append(props,
			record.Property{Key: "version", Value: strconv.FormatInt(ev.Version, 10)},
			record.Property{Key: "etag", Value: ev.Etag},
			record.Property{Key: "iothub-message-schema", Value: twin.MessageSchema(ev.OpType)},
			record.Property{Key: "operationTimestamp", Value: twin.FormatTime(ev.Time)},
			record.Property{Key: propTwinOffset, Value: strconv.FormatInt(off, 10)},
			record.Property{Key: propTwinEvent, Value: strconv.Itoa(i) + "/" + strconv.Itoa(len(events))},
			record.Property{Key: record.PropertyCluster, Value: t.b.opts.ClusterName},
		)
		now := t.b.now().UnixMilli()
		m := &record.Message{Topic: t.opts.EventsTopic, QueueID: sh.id, Body: ev.Body, Properties: props.String(),
			BornTimestamp: now, BornHost: t.b.storeHost, StoreHost: t.b.storeHost}
		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		res, err := t.b.store.PutWait(pctx, m, false)
		cancel()
		if err != nil {
			t.log.Error("twin event not stored", "shard", sh.id, "op", ev.OpType, "device", ev.DeviceID, "err", err)
			continue
		}
		sh.lastEnd = max(sh.lastEnd, res.PhysicalOffset+int64(res.WroteBytes))
	}
}

// ---- watches ----

// notify pushes desired changes to the peers watching their twins.
func (t *Twins) notify(changes []twin.DesiredChange) {
	if len(changes) == 0 {
		return
	}
	var byPeer map[twPeer][]twin.DesiredChange
	t.watchMu.Lock()
	for _, c := range changes {
		for p := range t.watchers[c.Key()] {
			if byPeer == nil {
				byPeer = map[twPeer][]twin.DesiredChange{}
			}
			byPeer[p] = append(byPeer[p], c)
		}
	}
	t.watchMu.Unlock()
	for p, list := range byPeer {
		if err := p.push(list); err != nil {
			t.log.Debug("twin notify push", "err", err)
		}
	}
}

// watch applies a watch request of peer and returns the epoch.
func (t *Twins) watch(action twin.WatchAction, keys []string, p twPeer) uint64 {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	switch action {
	case twin.WatchReplace:
		t.dropLocked(p)
		fallthrough
	case twin.WatchAdd:
		mine := t.watched[p]
		if mine == nil && len(keys) > 0 {
			mine = map[string]struct{}{}
			t.watched[p] = mine
		}
		for _, k := range keys {
			w := t.watchers[k]
			if w == nil {
				w = map[twPeer]struct{}{}
				t.watchers[k] = w
			}
			w[p] = struct{}{}
			mine[k] = struct{}{}
		}
	case twin.WatchRemove:
		for _, k := range keys {
			t.unwatchLocked(p, k)
		}
	}
	return t.epoch
}

func (t *Twins) unwatchLocked(p twPeer, k string) {
	if w := t.watchers[k]; w != nil {
		delete(w, p)
		if len(w) == 0 {
			delete(t.watchers, k)
		}
	}
	if mine := t.watched[p]; mine != nil {
		delete(mine, k)
		if len(mine) == 0 {
			delete(t.watched, p)
		}
	}
}

func (t *Twins) dropLocked(p twPeer) {
	for k := range t.watched[p] {
		t.unwatchLocked(p, k)
	}
}

// Watching returns how many twins peers watch (for tests and stats).
func (t *Twins) Watching() int {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	return len(t.watchers)
}

func (t *Twins) processWatch(c *remoting.Conn, cmd *protocol.Command) (*protocol.Command, error) {
	action, keys, err := twin.DecodeWatch(cmd.Body)
	if err != nil {
		return errResp(protocol.SystemError, "bad twin watch: %v", err), nil
	}
	out := protocol.NewResponse(protocol.Success, "")
	out.Body = twin.AppendWatchReply(nil, t.watch(action, keys, twConnPeer{c}))
	return out, nil
}

func (t *Twins) connClosed(c *remoting.Conn, _ error) {
	t.watchMu.Lock()
	t.dropLocked(twConnPeer{c})
	t.watchMu.Unlock()
}

// InvokeLocal serves a request of a front end in this process (standalone)
// without the remoting round trip: it is Do.
func (t *Twins) InvokeLocal(ctx context.Context, shard int32, req *twin.Request) (twin.Reply, error) {
	return t.Do(ctx, shard, req)
}

// WatchLocal is TwinWatch for a front end in this process: changes go to
// sink. It returns the epoch.
func (t *Twins) WatchLocal(action twin.WatchAction, keys []string, sink twin.Sink) uint64 {
	return t.watch(action, keys, twSinkPeer{sink})
}
