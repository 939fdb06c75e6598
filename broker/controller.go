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

	// behind: this master saw the controller hold its group at the
	// master's own epoch with an older sync state set epoch, behindEpoch
	// (the controller lost its last set change: applyView); the next
	// sync state set check proposes the master's set again on that
	// epoch (isr.go). Protected by mu.
	behind      bool
	behindEpoch int32
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
