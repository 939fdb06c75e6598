package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/internal/fsutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/ha"
)

// Controller mode (Options.Controllers).
//
// The broker registers with the controller (CONTROLLER_REGISTER_BROKER,
// any replica; a follower names the leader), heartbeats to every replica
// and takes its role from the group state the replicas answer with (and
// from the leader's NOTIFY_BROKER_ROLE_CHANGED). One goroutine (roleLoop)
// applies those views in order:
//
//   - master: stop replicating, drop a record cut in half at the log end,
//     record the new epoch in the store's epoch file, let the hosted state
//     store catch up, serve HA (controlled: epochs in the handshake, writes
//     wait for the sync state set), then accept writes and register with
//     the registries as broker 0;
//   - slave: stop accepting writes, close the HA server, replicate from the
//     new master (the HA client cuts a tail the master does not have), and
//     register under the broker's own id.
//
// A master acknowledges a write only while its lease is valid: it was
// confirmed as master by a controller replica within the lease the
// controller gave it (shorter than the controller's heartbeat timeout), so
// a master cut off from every replica stops acknowledging before a new one
// can be elected. With sync acknowledgement a write also needs every member
// of the sync state set (and at least MinInSyncReplicas of them); the
// master keeps the set up to date with the controller (isrLoop): a slave
// that has not caught up for SyncLagMax (or disconnected) is removed, one
// that has everything consumers may see is added. During a change the
// master waits for the union of the old and the new set.

// ctrlState is what the broker knows from the controller.
type ctrlState struct {
	mu         sync.Mutex
	id         int64  // controller broker id (0 until registered); protected by mu
	token      string // names this data directory; protected by mu
	registered bool   // protected by mu
	epoch      int32  // master epoch in force; protected by mu
	masterID   int64  // protected by mu
	masterAddr string // protected by mu
	masterHA   string // protected by mu
	syncSet    []int64
	syncEpoch  int32         // protected by mu (with syncSet)
	interval   time.Duration // heartbeat period; protected by mu
	lease      time.Duration // protected by mu
	leaderHint string        // replica to try first for leader-only requests; protected by mu
}

// controlled reports whether the broker is in controller mode.
func (b *Broker) controlled() bool { return len(b.opts.Controllers) > 0 }

// isSlave reports whether the broker acts as a slave now.
func (b *Broker) isSlave() bool {
	if b.controlled() {
		return !b.acting.Load()
	}
	return b.opts.Role == RoleSlave
}

// mono is a monotonic clock reading in nanoseconds.
func (b *Broker) mono() int64 { return time.Since(b.monoBase).Nanoseconds() }

// leaseValid reports whether a controller replica confirmed this broker
// as master recently enough (always true outside controller mode).
func (b *Broker) leaseValid() bool { return !b.controlled() || b.mono() < b.leaseUntil.Load() }

// writable reports whether sends may be stored now; reason says why not.
func (b *Broker) writable() (ok bool, reason string) {
	switch {
	case b.isSlave():
		return false, "is a slave"
	case !b.leaseValid():
		return false, "lost its master lease (no controller replica reachable): it stops acknowledging writes"
	}
	return true, ""
}

// roleName is the role as GET_BROKER_RUNTIME_INFO and metrics show it.
func (b *Broker) roleName() string {
	if b.controlled() && b.isSlave() {
		return RoleSlave.String()
	}
	return b.opts.Role.String()
}

// registryBrokerID is the id the broker registers with the registries
// under: 0 as (leased) master, its own id otherwise; ok is false while a
// controller-mode broker has no id yet.
func (b *Broker) registryBrokerID() (int64, bool) {
	if !b.controlled() {
		return b.opts.BrokerID, true
	}
	if b.acting.Load() && b.leaseValid() {
		return protocol.MasterID, true
	}
	b.ctl.mu.Lock()
	defer b.ctl.mu.Unlock()
	return b.ctl.id, b.ctl.id != 0
}

// ctrlMaster returns the master's remoting and HA addresses as the
// controller last named them.
func (b *Broker) ctrlMaster() (addr, haAddr string) {
	b.ctl.mu.Lock()
	defer b.ctl.mu.Unlock()
	return b.ctl.masterAddr, b.ctl.masterHA
}

// Controller identity file <store root>/config/controller.json:
// {"brokerId":<id>,"token":"<32 hex digits>"}, written atomically. The
// token names the data directory: a broker that comes back under its id
// with another token lost its data and may not stay in the sync state
// set. TestBrokerControllerIdentityPinned pins the format.
type ctrlIdentity struct {
	BrokerID int64  `json:"brokerId"`
	Token    string `json:"token"`
}

func (b *Broker) identityPath() string {
	return filepath.Join(b.opts.Store.Root, "config", "controller.json")
}

// loadIdentity reads (or creates) the identity file.
func (b *Broker) loadIdentity() error {
	st := b.ctl
	data, err := os.ReadFile(b.identityPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			return fmt.Errorf("broker: controller token: %w", err)
		}
		st.token = hex.EncodeToString(r[:])
		st.id = b.opts.BrokerID
		return b.saveIdentity()
	case err != nil:
		return fmt.Errorf("broker: %w", err)
	}
	var id ctrlIdentity
	if err := json.Unmarshal(data, &id); err != nil || id.Token == "" || id.BrokerID < 0 {
		return fmt.Errorf("broker: %s is damaged (%v); remove it only if this broker's data is gone", b.identityPath(), err)
	}
	st.token, st.id = id.Token, id.BrokerID
	if b.opts.BrokerID != 0 && b.opts.BrokerID != id.BrokerID {
		b.log.Warn("configured broker id differs from the one the controller assigned before; using the configured one",
			"configured", b.opts.BrokerID, "stored", id.BrokerID)
		st.id = b.opts.BrokerID
	}
	return nil
}

func (b *Broker) saveIdentity() error {
	st := b.ctl
	data, err := json.Marshal(ctrlIdentity{BrokerID: st.id, Token: st.token})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(b.identityPath()), 0o755); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := fsutil.WriteFileAtomic(b.identityPath(), data, 0o644); err != nil {
		return fmt.Errorf("broker: save controller identity: %w", err)
	}
	return nil
}

// startController starts controller mode: the HA listener (its address
// is registered with the controller), the role, heartbeat and sync state
// set loops.
func (b *Broker) startController(ctx context.Context) error {
	b.ctl = &ctrlState{interval: 500 * time.Millisecond}
	if err := b.loadIdentity(); err != nil {
		return err
	}
	addr := b.opts.HAListen
	if addr == "" {
		addr = defaultHAListen(b.opts.ListenAddr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("broker: HA listen %s: %w", addr, err)
	}
	b.haLn = ln
	b.haListen = ln.Addr().String()
	b.haAdvertised = net.JoinHostPort(b.storeHost.Addr().String(), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	b.srv.RegisterFunc(protocol.NotifyBrokerRoleChanged, remoting.PoolHeartbeat, b.processRoleChanged)
	for _, fn := range []func(context.Context){b.roleLoop, b.ctrlLoop, b.isrLoop, b.slaveSyncLoop} {
		b.ctlWG.Add(1)
		go func() {
			defer b.ctlWG.Done()
			fn(ctx)
		}()
	}
	return nil
}

// stopController stops the controller-mode loops (no more role changes),
// then the HA listener the first promotion did not take. Idempotent.
func (b *Broker) stopController() {
	if b.ctlCancel == nil {
		return
	}
	b.ctlCancel()
	b.ctlWG.Wait()
	if b.haLn != nil {
		_ = b.haLn.Close()
		b.haLn = nil
	}
}

// processRoleChanged serves NOTIFY_BROKER_ROLE_CHANGED from the leader.
func (b *Broker) processRoleChanged(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var g protocol.ControllerGroup
	if err := protocol.DecodeControllerBody(req.Body, &g); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	if g.BrokerName != b.opts.BrokerName {
		return errResp(protocol.ControllerInvalidRequest, "this broker belongs to %s, not %s", b.opts.BrokerName, g.BrokerName), nil
	}
	b.submitView(g)
	b.kickHeartbeat()
	return protocol.NewResponse(protocol.Success, ""), nil
}

// submitView hands a group view to the role loop (the latest wins).
func (b *Broker) submitView(g protocol.ControllerGroup) {
	for {
		select {
		case b.roleCh <- g:
			return
		default:
		}
		select {
		case old := <-b.roleCh:
			if newerView(old, g) {
				g = old
			}
		default:
		}
	}
}

func newerView(a, b protocol.ControllerGroup) bool {
	return a.MasterEpoch > b.MasterEpoch || (a.MasterEpoch == b.MasterEpoch && a.SyncStateSetEpoch > b.SyncStateSetEpoch)
}

func (b *Broker) kickHeartbeat() {
	select {
	case b.hbKick <- struct{}{}:
	default:
	}
}

// ctrlLoop registers with the controller, then heartbeats to every
// replica every interval (re-registering when a replica asks for it).
func (b *Broker) ctrlLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		b.ctl.mu.Lock()
		registered, interval := b.ctl.registered, b.ctl.interval
		b.ctl.mu.Unlock()
		wait := interval
		if !registered {
			if err := b.ctrlRegister(ctx); err != nil {
				b.plog.Warn("register with the controller failed; retrying", "controllers", b.opts.Controllers, "err", err)
				wait = backoff
				backoff = min(2*backoff, 2*time.Second)
			} else {
				backoff = 100 * time.Millisecond
				wait = 0
			}
		} else {
			b.heartbeatRound(ctx)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-b.hbKick:
			t.Stop()
		}
		b.leaseChanged()
	}
}

// leaseChanged registers with the registries when the broker starts or
// stops being a leased master (broker id 0 there), and logs it.
func (b *Broker) leaseChanged() {
	now := b.acting.Load() && b.leaseValid()
	if b.leaseHeld.Swap(now) == now {
		return
	}
	if now {
		b.log.Info("master lease holds: accepting writes")
	} else if b.acting.Load() {
		b.log.Warn("master lease lost: no controller replica confirmed this broker as master in time; writes are refused until one does")
	}
	b.goFunc(b.triggerRegister)
}

// ctrlCall sends a leader-only request, trying the last known leader
// first and following a replica's hint.
func (b *Broker) ctrlCall(ctx context.Context, code int32, body any) (*protocol.Command, error) {
	enc, err := protocol.EncodeJSON(body)
	if err != nil {
		return nil, err
	}
	b.ctl.mu.Lock()
	order := slices.Clone(b.opts.Controllers)
	if h := b.ctl.leaderHint; h != "" {
		order = append([]string{h}, slices.DeleteFunc(order, func(a string) bool { return a == h })...)
	}
	b.ctl.mu.Unlock()
	var errs []error
	for i := 0; i < len(order) && i < 8; i++ {
		a := order[i]
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := b.client.Invoke(cctx, a, protocol.NewRequest(code, nil, enc))
		cancel()
		switch {
		case err != nil:
			errs = append(errs, err)
		case resp.Code == protocol.ControllerNotLeader:
			errs = append(errs, fmt.Errorf("%s: %s", a, resp.Remark))
			if h := resp.ExtFields[protocol.ControllerLeaderField]; h != "" && !slices.Contains(order[i+1:], h) {
				order = append(order, h)
			}
		default:
			b.ctl.mu.Lock()
			b.ctl.leaderHint = a
			b.ctl.mu.Unlock()
			return resp, nil
		}
	}
	return nil, fmt.Errorf("broker: no controller leader: %w", errors.Join(errs...))
}

// ctrlRegister registers the broker with the controller.
func (b *Broker) ctrlRegister(ctx context.Context) error {
	st := b.ctl
	last, _ := b.store.LastEpoch()
	st.mu.Lock()
	body := protocol.ControllerRegister{BrokerAddr: b.addr, BrokerID: st.id, BrokerName: b.opts.BrokerName,
		ClusterName: b.opts.ClusterName, Epoch: last.Epoch, HAAddr: b.haAdvertised, MaxOffset: b.store.MaxPhysicalOffset(), Token: st.token}
	st.mu.Unlock()
	sent := b.mono()
	resp, err := b.ctrlCall(ctx, protocol.ControllerRegisterBroker, body)
	if err != nil {
		return err
	}
	if resp.Code != protocol.Success {
		return fmt.Errorf("broker: the controller refused the registration: %d %s", resp.Code, resp.Remark)
	}
	var r protocol.ControllerRegisterResponse
	if err := protocol.DecodeControllerBody(resp.Body, &r); err != nil {
		return err
	}
	st.mu.Lock()
	changed := st.id != r.BrokerID
	st.id = r.BrokerID
	st.registered = true // views are applied from now on (the id is known)
	if r.HeartbeatIntervalMillis > 0 {
		st.interval = time.Duration(r.HeartbeatIntervalMillis) * time.Millisecond
	}
	st.lease = time.Duration(r.LeaseMillis) * time.Millisecond
	st.mu.Unlock()
	if changed {
		if err := b.saveIdentity(); err != nil {
			return err
		}
	}
	b.log.Info("registered with the controller", "id", r.BrokerID, "master", r.Group.MasterID, "epoch", r.Group.MasterEpoch,
		"lease", time.Duration(r.LeaseMillis)*time.Millisecond)
	b.renewLease(sent, r.Group)
	b.submitView(r.Group)
	return nil
}

// renewLease extends the master lease from a heartbeat sent at sent whose
// answer names this broker master at its epoch.
func (b *Broker) renewLease(sent int64, g protocol.ControllerGroup) {
	st := b.ctl
	st.mu.Lock()
	ok := g.MasterID != 0 && g.MasterID == st.id && g.MasterEpoch >= st.epoch
	lease := st.lease
	st.mu.Unlock()
	if !ok || lease <= 0 {
		return
	}
	until := sent + lease.Nanoseconds()
	for {
		cur := b.leaseUntil.Load()
		if until <= cur || b.leaseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// heartbeatRound sends one heartbeat to every replica in parallel and
// applies the newest view among the answers.
func (b *Broker) heartbeatRound(ctx context.Context) {
	st := b.ctl
	last, _ := b.store.LastEpoch()
	st.mu.Lock()
	hb := protocol.ControllerHeartbeat{BrokerAddr: b.addr, BrokerID: st.id, BrokerName: b.opts.BrokerName,
		ClusterName: b.opts.ClusterName, Epoch: max(st.epoch, last.Epoch), Master: b.acting.Load(), MaxOffset: b.store.MaxPhysicalOffset()}
	timeout := max(st.interval, 200*time.Millisecond)
	st.mu.Unlock()
	enc, err := protocol.EncodeJSON(hb)
	if err != nil {
		return
	}
	sent := b.mono()
	type answer struct {
		g   protocol.ControllerGroup
		ok  bool
		reg bool
	}
	answers := make(chan answer, len(b.opts.Controllers))
	var wg sync.WaitGroup
	for _, a := range b.opts.Controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			resp, err := b.client.Invoke(cctx, a, protocol.NewRequest(protocol.BrokerHeartbeat, nil, enc))
			if err != nil {
				return
			}
			switch resp.Code {
			case protocol.ControllerBrokerNeedToBeRegistered:
				answers <- answer{reg: true}
			case protocol.Success, protocol.ControllerFencedMasterEpoch:
				var r protocol.ControllerHeartbeatResponse
				if protocol.DecodeControllerBody(resp.Body, &r) == nil {
					if resp.Code == protocol.Success {
						b.renewLease(sent, r.Group)
					} else {
						b.plog.Warn("the controller refused this broker as master", "remark", resp.Remark)
					}
					answers <- answer{g: r.Group, ok: true}
				}
			}
		}()
	}
	wg.Wait()
	close(answers)
	var best *protocol.ControllerGroup
	unknown, known := 0, 0
	for a := range answers {
		if a.reg {
			unknown++
		} else {
			known++
		}
		if a.ok && (best == nil || newerView(a.g, *best)) {
			g := a.g
			best = &g
		}
	}
	if unknown > 0 && known == 0 {
		// Only replicas that do not know this broker answered (a
		// controller whose state was lost): register again. A replica
		// that restarted and has not caught up yet does not stop the
		// heartbeats to the others.
		st.mu.Lock()
		st.registered = false
		st.mu.Unlock()
	}
	if best != nil {
		b.submitView(*best)
	}
}

// roleLoop applies the controller's views one after the other.
func (b *Broker) roleLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case g := <-b.roleCh:
			b.applyView(g)
		}
	}
}

// applyView moves the broker to the role a group view gives it.
func (b *Broker) applyView(g protocol.ControllerGroup) {
	st := b.ctl
	st.mu.Lock()
	if !st.registered || g.BrokerName != b.opts.BrokerName || g.MasterEpoch < st.epoch ||
		(g.MasterEpoch == st.epoch && g.SyncStateSetEpoch < st.syncEpoch) {
		st.mu.Unlock()
		return
	}
	prevEpoch, prevMaster := st.epoch, st.masterID
	st.epoch, st.masterID, st.masterAddr, st.masterHA = g.MasterEpoch, g.MasterID, g.MasterAddr, g.MasterHAAddr
	st.syncSet, st.syncEpoch = slices.Clone(g.SyncStateSet), g.SyncStateSetEpoch
	id := st.id
	st.mu.Unlock()
	switch {
	case g.MasterID != 0 && g.MasterID == id:
		if !b.acting.Load() || prevEpoch != g.MasterEpoch {
			b.becomeMaster(g)
		} else if srv := b.haSrv.Load(); srv != nil {
			srv.SetSyncStateSet(b.ackSet(), b.opts.MinInSyncReplicas)
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

// ackSet is the set of members whose acks writes need: the controller's
// set, joined with a pending change (isrLoop).
func (b *Broker) ackSet() []int64 {
	st := b.ctl
	st.mu.Lock()
	defer st.mu.Unlock()
	set := append(slices.Clone(st.syncSet), b.pendingSet...)
	for id := range b.candidates {
		set = append(set, id)
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// becomeMaster makes this broker its group's master at g's epoch.
func (b *Broker) becomeMaster(g protocol.ControllerGroup) {
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
	// replicated since this broker started (pull.go).
	b.masterSince.Store(b.now().UnixMilli())
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
		if err := l.becameMaster(); err != nil {
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
	srv.SetSyncStateSet(b.ackSet(), b.opts.MinInSyncReplicas)
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
	// becameMaster runs before the broker accepts writes as master.
	becameMaster() error
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

// runtimeBrokerID is the broker's own id for GET_BROKER_RUNTIME_INFO: the
// configured one, or the controller's.
func (b *Broker) runtimeBrokerID() int64 {
	if !b.controlled() {
		return b.opts.BrokerID
	}
	b.ctl.mu.Lock()
	defer b.ctl.mu.Unlock()
	return b.ctl.id
}

// controllerRuntimeInfo adds controller-mode keys to
// GET_BROKER_RUNTIME_INFO: the master epoch in force, the master's id,
// the sync state set (comma-separated ids) and whether the master lease
// holds.
func (b *Broker) controllerRuntimeInfo(t map[string]string) {
	if !b.controlled() {
		return
	}
	st := b.ctl
	st.mu.Lock()
	t["controllerMasterEpoch"] = strconv.Itoa(int(st.epoch))
	t["controllerMasterId"] = strconv.FormatInt(st.masterID, 10)
	ids := make([]string, len(st.syncSet))
	for i, id := range st.syncSet {
		ids[i] = strconv.FormatInt(id, 10)
	}
	st.mu.Unlock()
	t["syncStateSet"] = strings.Join(ids, ",")
	t["masterLease"] = strconv.FormatBool(b.acting.Load() && b.leaseValid())
}

// ControllerState reports, in controller mode, the broker's controller id,
// the master epoch in force, whether it acts as master with a valid lease,
// and the sync state set as it last saw it.
func (b *Broker) ControllerState() (id int64, epoch int32, master bool, syncSet []int64) {
	if !b.controlled() {
		return 0, 0, false, nil
	}
	st := b.ctl
	st.mu.Lock()
	id, epoch, syncSet = st.id, st.epoch, slices.Clone(st.syncSet)
	st.mu.Unlock()
	return id, epoch, b.acting.Load() && b.leaseValid(), syncSet
}
