package broker

import (
	"context"
	"errors"
	"net"
	"slices"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/ha"
)

// Role changes in controller mode (controller.go has the overview):
// roleLoop applies the controller's views in order, becomeMaster and
// becomeSlave move the broker and its hosted services (roleListener)
// between the roles.

// roleLoop applies the controller's views one after the other.
func (b *Broker) roleLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case g := <-b.roleCh:
			b.applyView(ctx, g)
		}
	}
}

// applyView moves the broker to the role a group view gives it.
func (b *Broker) applyView(ctx context.Context, g protocol.ControllerGroup) {
	st := b.ctl
	st.mu.Lock()
	if !st.registered || g.BrokerName != b.opts.BrokerName || g.MasterEpoch < st.epoch ||
		(g.MasterEpoch == st.epoch && g.SyncStateSetEpoch < st.syncEpoch) {
		if st.registered && g.BrokerName == b.opts.BrokerName && g.MasterEpoch == st.epoch &&
			g.SyncStateSetEpoch < st.syncEpoch && st.id != 0 && g.MasterID == st.id {
			// The controller names this broker master at its epoch but
			// holds an older sync state set than the one this master
			// acts on: it lost the set's last change (a replica's log
			// tail cut), or the view is a late copy. The master does not
			// go back to the older set (writes since need the newer
			// one's acks); it proposes its own set again on the older
			// epoch (isr.go), which the controller applies, or answers
			// as done when it is a late copy. Left alone, the controller
			// would elect from the older set when this master dies.
			st.behind, st.behindEpoch = true, g.SyncStateSetEpoch
		}
		st.mu.Unlock()
		return
	}
	st.behind = false
	prevEpoch, prevMaster := st.epoch, st.masterID
	st.epoch, st.masterID, st.masterAddr, st.masterHA = g.MasterEpoch, g.MasterID, g.MasterAddr, g.MasterHAAddr
	st.syncSet, st.syncEpoch = slices.Clone(g.SyncStateSet), g.SyncStateSetEpoch
	id := st.id
	st.mu.Unlock()
	switch {
	case g.MasterID != 0 && g.MasterID == id:
		if !b.acting.Load() || prevEpoch != g.MasterEpoch {
			b.becomeMaster(ctx, g)
		} else if srv := b.haSrv.Load(); srv != nil {
			b.pushSyncSet(srv)
		}
	case g.MasterID != 0:
		if b.acting.Load() || prevMaster != g.MasterID || prevEpoch != g.MasterEpoch || b.haCli.Load() == nil {
			b.becomeSlave(g)
		}
	default:
		if b.acting.Load() {
			b.becomeSlave(g)
		}
	}
}

// pushSyncSet tells the HA server whose acks writes need (the
// controller's set joined with a pending change and the candidates,
// isrLoop) and which members the controller holds: a write counts only
// those towards MinInSyncReplicas, so a slave that caught up is not
// counted before the controller could elect it.
func (b *Broker) pushSyncSet(srv *ha.Server) {
	st := b.ctl
	st.mu.Lock()
	held := slices.Clone(st.syncSet)
	set := append(slices.Clone(st.syncSet), b.pendingSet...)
	for id := range b.candidates {
		set = append(set, id)
	}
	st.mu.Unlock()
	slices.Sort(set)
	srv.SetSyncStateSetChanging(slices.Compact(set), held, b.opts.MinInSyncReplicas)
}

// becomeMaster makes this broker its group's master at g's epoch.
func (b *Broker) becomeMaster(ctx context.Context, g protocol.ControllerGroup) {
	b.acting.Store(false)
	if c := b.haCli.Swap(nil); c != nil {
		_ = c.Close()
	}
	if srv := b.haSrv.Swap(nil); srv != nil {
		_ = srv.Close()
	}
	end, err := b.store.DropPartialTail()
	if err != nil {
		b.log.Error("cannot become master: drop the partial record at the log end", "err", err)
		return
	}
	// Records stored from here on are this master's own: a group whose
	// offset is past a queue's end (the old master's tail this broker
	// never got) goes back to the first of them, not to the first record
	// replicated since this broker started (pull.go). The log end, not
	// the time: a record the old master stored just before the failover
	// carries its clock, which may be ahead of this node's.
	b.masterFrom.Store(end)
	// The topic table's version as last copied from the old master: not
	// the current one, which the hosted services below and this slave's
	// own changes since the copy (a group's retry topic) have bumped
	// with this node's clock (importStoreTopics).
	copied := b.topics.CopiedVersion()
	e, err := b.store.StartEpoch(g.MasterEpoch)
	if err != nil {
		b.log.Error("cannot become master at this epoch", "epoch", g.MasterEpoch, "err", err)
		return
	}
	// The hosted services first create the topics they own with the
	// queue counts they are configured for; importing them from the log
	// would give them only the queues that hold records so far (a state
	// store or twin shard nobody wrote to yet has none), and the service
	// would then refuse the topic.
	for _, l := range b.roleListeners() {
		if err := l.becameMaster(ctx); err != nil {
			b.log.Error("a hosted service failed to take over as master", "err", err)
		}
	}
	b.importStoreTopics(copied)
	ln := b.haLn
	b.haLn = nil
	if ln == nil {
		if ln, err = net.Listen("tcp", b.haListen); err != nil {
			b.log.Error("cannot become master: HA listen", "addr", b.haListen, "err", err)
			return
		}
	}
	ho := b.haOptions()
	ho.Epoch = g.MasterEpoch
	srv, err := ha.Serve(b.store, ln, ho)
	if err != nil {
		_ = ln.Close()
		b.log.Error("cannot become master: HA server", "err", err)
		return
	}
	b.pushSyncSet(srv)
	b.haSrv.Store(srv)
	b.acting.Store(true)
	b.kickHeartbeat() // the lease: a replica confirms this broker as master
	b.log.Info("became master", "epoch", g.MasterEpoch, "epochStart", e.StartOffset, "end", end,
		"syncStateSet", g.SyncStateSet, "lease", b.leaseValid())
	// The registries learn it once the lease holds (leaseChanged).
}

// becomeSlave makes this broker replicate from g's master (or wait, when
// g names none).
func (b *Broker) becomeSlave(g protocol.ControllerGroup) {
	wasMaster := b.acting.Swap(false)
	if srv := b.haSrv.Swap(nil); srv != nil {
		_ = srv.Close()
	}
	if wasMaster {
		b.log.Warn("stepped down as master", "epoch", g.MasterEpoch, "newMaster", g.MasterID, "newMasterAddr", g.MasterAddr)
		for _, l := range b.roleListeners() {
			l.becameSlave()
		}
	}
	if c := b.haCli.Swap(nil); c != nil {
		_ = c.Close()
	}
	if g.MasterID == 0 || g.MasterHAAddr == "" {
		b.log.Warn("the controller lists no master for this group; waiting", "epoch", g.MasterEpoch)
		return
	}
	ho := b.haOptions()
	ho.Epoch = g.MasterEpoch
	ho.OnTruncate = b.afterTruncate
	ho.OnConnected = b.kickSync
	masterHA := g.MasterHAAddr
	c, err := ha.StartClient(b.store, ho, func() string { return masterHA })
	if err != nil {
		b.log.Error("cannot replicate from the new master", "err", err)
		return
	}
	b.haCli.Store(c)
	b.log.Info("following master", "master", g.MasterID, "addr", g.MasterAddr, "ha", masterHA, "epoch", g.MasterEpoch)
	b.goFunc(b.triggerRegister)
}

// afterTruncate tells the hosted services that the HA client cut the log.
func (b *Broker) afterTruncate(offset int64) error {
	var errs []error
	for _, l := range b.roleListeners() {
		errs = append(errs, l.truncated(offset))
	}
	return errors.Join(errs...)
}

// haOptions are the HA options of controller mode.
func (b *Broker) haOptions() ha.Options {
	ho := b.opts.HA
	ho.BrokerName, ho.BrokerAddr = b.opts.BrokerName, b.addr
	if ho.Logger == nil {
		ho.Logger = b.log
	}
	ho.Controlled = true
	b.ctl.mu.Lock()
	ho.BrokerID = b.ctl.id
	b.ctl.mu.Unlock()
	return ho
}

// importStoreTopics adds to the topic table the topics a new master has
// replicated data for but not their configuration yet (copied from the
// old master every SlaveSyncInterval and at each change it notices,
// metasync.go), so their routes are published. A configured topic whose
// log holds queues past its read queue count gets read queues up to the
// highest such queue holding a message stored at or after the copied
// table's version (copied, the old master's clock): the queues were added
// on the old master after that copy, and consumers must reach those
// messages. Queues holding only older messages stay hidden: the table
// copied after them is the admin's, who shrank the read queues on
// purpose. Write queues stay as configured.
func (b *Broker) importStoreTopics(copied protocol.DataVersion) {
	for _, topic := range b.store.Topics() {
		ids := b.store.QueueIDs(topic)
		if len(ids) == 0 {
			continue
		}
		if tc, ok := b.topics.Get(topic); ok {
			n := tc.ReadQueueNums
			for _, q := range ids {
				if q >= n && b.store.OffsetByTime(topic, q, copied.Timestamp) < b.store.MaxOffset(topic, q) {
					n = q + 1
				}
			}
			if n > tc.ReadQueueNums {
				old := tc.ReadQueueNums
				tc.ReadQueueNums = n
				if err := b.topics.Update(tc); err != nil {
					b.log.Warn("import the queues of a topic from the log", "topic", topic, "err", err)
					continue
				}
				b.log.Warn("the log holds queues this master's copy of the topic did not have (added on the old master "+
					"shortly before the failover): read queues raised", "topic", topic, "from", old, "to", n)
			}
			continue
		}
		n := slices.Max(ids) + 1
		tc := protocol.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: PermRW,
			TopicFilterType: protocol.TopicFilterSingleTag}
		if err := b.topics.Update(tc); err != nil {
			b.log.Warn("import topic from the log", "topic", topic, "err", err)
			continue
		}
		b.imported.add(topic)
	}
}

// roleListener is a service hosted on the broker whose state follows the
// role in controller mode (the state store shards).
type roleListener interface {
	// becameMaster runs before the broker accepts writes as master. Its
	// waits end with ctx (the controller loop's life: Close cancels it).
	becameMaster(ctx context.Context) error
	// becameSlave runs after the broker stopped accepting writes.
	becameSlave()
	// truncated runs after the replication client cut the log at offset,
	// before it appends anything.
	truncated(offset int64) error
}

func (b *Broker) addRoleListener(l roleListener) {
	b.roleMu.Lock()
	defer b.roleMu.Unlock()
	b.roleLs = append(b.roleLs, l)
}

func (b *Broker) removeRoleListener(l roleListener) {
	b.roleMu.Lock()
	defer b.roleMu.Unlock()
	b.roleLs = slices.DeleteFunc(b.roleLs, func(x roleListener) bool { return x == l })
}

func (b *Broker) roleListeners() []roleListener {
	b.roleMu.Lock()
	defer b.roleMu.Unlock()
	return slices.Clone(b.roleLs)
}
