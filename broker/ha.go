package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/ha"
)

// Master/slave roles.
//
// The store ships the commitlog (ha.Server on a master,
// ha.Client on a slave; wire format in store/ha/wire.go); the broker
// picks the role, the addresses and what a send waits for:
//
//   - ASYNC_MASTER answers a send once the local store has it; slaves
//     follow as fast as the stream goes.
//   - SYNC_MASTER answers a send (whose WAIT property is not "false") once
//     a slave reported an end at or past the message: SLAVE_NOT_AVAILABLE
//     (11) at once when no slave is connected or the best one is more than
//     HA.FallBehindMax (256 MiB) behind, FLUSH_SLAVE_TIMEOUT (12) after
//     SlaveAckTimeout. Either way the message is stored on the master.
//   - SLAVE refuses sends, replicates the master's log, copies its topics,
//     subscription groups, consumer offsets and delay offsets every
//     SlaveSyncInterval and whenever the master's topics or groups change,
//     and its offsets within about a quarter second of their change
//     (metasync.go), and serves pulls: always when SlaveReadEnable,
//     otherwise only while its master is unreachable (with the master up
//     it answers PULL_RETRY_IMMEDIATELY suggesting broker 0). It takes
//     consumer offset commits (UPDATE_CONSUMER_OFFSET) into its table, but
//     the next copy from the master replaces them: commits made while the
//     master is down are kept on the slave only until the master is back.
//     SmartGo clients commit to the master only and keep offsets in memory
//     while it is down.

// errNoMaster: a slave does not know its master's remoting address yet.
var errNoMaster = errors.New("broker: slave does not know its master yet")

// errNotReplicating is the readiness error of a slave that knows its
// master but does not copy from it (cut off, or far behind).
var errNotReplicating = errors.New("broker: slave not replicating")

// errNotWritable is the readiness error of a controller-mode master that
// refuses writes (its lease ran out).
var errNotWritable = errors.New("broker: not writable")

// defaultHAListen is the listen host with port + 1 (port 0 stays 0).
func defaultHAListen(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	p, _ := strconv.Atoi(port)
	if p != 0 {
		p++
	}
	return net.JoinHostPort(host, strconv.Itoa(p))
}

// startHA starts the master's HA server or the slave's HA client and
// metadata copy.
func (b *Broker) startHA(ctx context.Context) error {
	ho := b.opts.HA
	ho.BrokerName = b.opts.BrokerName
	ho.BrokerAddr = b.addr
	if ho.Logger == nil {
		ho.Logger = b.log
	}
	if b.opts.Role == RoleSlave {
		ho.OnConnected = b.kickSync
		c, err := ha.StartClient(b.store, ho, b.masterHAAddress)
		if err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		b.haCli.Store(c)
		b.goFunc(func() { b.slaveSyncLoop(ctx) })
		return nil
	}
	addr := b.opts.HAListen
	if addr == "" {
		addr = defaultHAListen(b.opts.ListenAddr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("broker: HA listen %s: %w", addr, err)
	}
	srv, err := ha.Serve(b.store, ln, ho)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("broker: %w", err)
	}
	b.haSrv.Store(srv)
	port := ln.Addr().(*net.TCPAddr).Port
	b.haAdvertised = net.JoinHostPort(b.storeHost.Addr().String(), strconv.Itoa(port))
	return nil
}

// closeHA stops replication (before the store closes).
func (b *Broker) closeHA() error {
	var errs []error
	if srv := b.haSrv.Swap(nil); srv != nil {
		errs = append(errs, srv.Close())
	}
	if c := b.haCli.Swap(nil); c != nil {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// HAAddr returns the master's advertised HA address ("" on a slave).
func (b *Broker) HAAddr() string { return b.haAdvertised }

// HAServer returns the master's replication server (nil on a slave).
func (b *Broker) HAServer() *ha.Server { return b.haSrv.Load() }

// HAClient returns the slave's replication client (nil on a master).
func (b *Broker) HAClient() *ha.Client { return b.haCli.Load() }

// notifyHA wakes the replication senders after the log grew.
func (b *Broker) notifyHA() {
	if srv := b.haSrv.Load(); srv != nil {
		srv.Notify()
	}
}

// masterHAAddress is the HA address a slave connects to: configured, else
// what the registries reported.
func (b *Broker) masterHAAddress() string {
	if b.controlled() {
		_, a := b.ctrlMaster()
		return a
	}
	if b.opts.HAMasterAddress != "" {
		return b.opts.HAMasterAddress
	}
	if p := b.masterHAAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// masterRemotingAddr is a slave's master's remoting address: from the
// registries, else from the master's HA handshake.
func (b *Broker) masterRemotingAddr() string {
	if b.controlled() {
		a, _ := b.ctrlMaster()
		return a
	}
	if p := b.masterAddr.Load(); p != nil && *p != "" {
		return *p
	}
	if c := b.haCli.Load(); c != nil {
		return c.MasterAddr()
	}
	return ""
}

// masterReachable reports whether a slave currently replicates from its
// master (the HA session is up).
func (b *Broker) masterReachable() bool {
	c := b.haCli.Load()
	return c != nil && c.Connected()
}

// waitSlave applies the sync-master rule to a stored entry ending at end,
// waiting on the calling goroutine (the state store; sends use
// pendingSend.replicated, which does not wait), and returns the response
// code. wait false answers without waiting for the slave.
func (b *Broker) waitSlave(ctx context.Context, code int32, end int64, wait bool) int32 {
	if b.opts.Role != RoleSyncMaster || code != protocol.Success || !wait {
		return code
	}
	srv := b.haSrv.Load()
	if srv == nil {
		if b.controlled() {
			return protocol.SlaveNotAvailable // demoted while the message was being stored
		}
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.SlaveAckTimeout)
	defer cancel()
	return b.slaveCode(end, srv.WaitAck(ctx, end))
}

// slaveSyncLoop copies the master's metadata: every second until the first
// copy succeeds, then every SlaveSyncInterval, and at once when the master
// says its topics or groups changed (metasync.go). An offsets-only copy
// (on the master's offset notice) leaves the next full copy where it was
// due: notices every offsetNoticeInterval, as long as consumers commit,
// must not put it off for good (a topic or group notice the slave missed
// is caught up only by it).
func (b *Broker) slaveSyncLoop(ctx context.Context) {
	synced := false
	due := func() time.Time { // the next full copy, from now
		if synced {
			return time.Now().Add(b.opts.SlaveSyncInterval)
		}
		return time.Now().Add(min(b.opts.SlaveSyncInterval, time.Second))
	}
	next := due()
	for {
		t := time.NewTimer(time.Until(next))
		offsetsOnly := false
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-b.syncKick: // the master's metadata changed, or the HA link came up (metasync.go)
			t.Stop()
		case <-b.offsetSyncKick: // the master's offsets changed (metasync.go)
			t.Stop()
			offsetsOnly = synced
		}
		if !b.isSlave() {
			synced = false // controller mode: a master copies nothing
			next = due()
			continue
		}
		if offsetsOnly {
			addr := b.masterRemotingAddr()
			if addr == "" {
				continue
			}
			if err := b.syncOffsetsFrom(ctx, addr); err != nil {
				b.log.Debug("copy offsets from master", "err", err)
			}
			continue
		}
		if err := b.syncFromMaster(ctx); err != nil {
			b.log.Debug("copy metadata from master", "err", err)
		} else {
			synced = true
		}
		next = due()
	}
}

// getFromMaster sends a request of code without header or body to the
// master at addr and returns its answer's body.
func (b *Broker) getFromMaster(ctx context.Context, addr string, code int32) ([]byte, error) {
	resp, err := b.askMaster(ctx, addr, code)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// askMaster is getFromMaster returning the whole answer.
func (b *Broker) askMaster(ctx context.Context, addr string, code int32) (*protocol.Command, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.client.Invoke(cctx, addr, protocol.NewRequest(code, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("broker: request %d to master %s: %w", code, addr, err)
	}
	if resp.Code != protocol.Success {
		return nil, fmt.Errorf("broker: master %s answered %d to request %d: %s", addr, resp.Code, code, resp.Remark)
	}
	return resp, nil
}

// syncOffsetsFrom copies consumer offsets and delay offsets from the
// master at addr (GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET).
func (b *Broker) syncOffsetsFrom(ctx context.Context, addr string) error {
	resp, err := b.askMaster(ctx, addr, protocol.GetAllConsumerOffset)
	if err != nil {
		return err
	}
	var ow protocol.ConsumerOffsetSerializeWrapper
	if err := protocol.DecodeJSON(resp.Body, &ow); err != nil {
		return fmt.Errorf("broker: master consumer offsets: %w", err)
	}
	b.installOffsets(ow, resp.ExtFields)
	if resp, err = b.askMaster(ctx, addr, protocol.GetAllDelayOffset); err != nil {
		return err
	}
	return b.installDelayOffsets(resp.Body, resp.ExtFields)
}

// syncFromMaster copies topics, groups, consumer offsets and delay offsets
// from the master (GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
// GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET).
func (b *Broker) syncFromMaster(ctx context.Context) error {
	addr := b.masterRemotingAddr()
	if addr == "" {
		return errNoMaster
	}
	get := func(code int32) ([]byte, error) { return b.getFromMaster(ctx, addr, code) }
	body, err := get(protocol.GetAllTopicConfig)
	if err != nil {
		return err
	}
	var tw protocol.TopicConfigSerializeWrapper
	if err := protocol.DecodeJSON(body, &tw); err != nil {
		return fmt.Errorf("broker: master topics: %w", err)
	}
	if tw.DataVersion != b.topics.DataVersion() {
		before := b.topics.Snapshot().TopicConfigTable
		if err := b.topics.Replace(tw); err != nil {
			return err
		}
		// A topic the master deleted: its counters go, as on the master.
		for n := range before {
			if tw.TopicConfigTable[n] == nil {
				b.stats.ForgetTopic(n)
			}
		}
		b.log.Info("copied topic config from master", "master", addr, "topics", len(tw.TopicConfigTable))
	}
	if body, err = get(protocol.GetAllSubscriptionGroupConfig); err != nil {
		return err
	}
	var gw SubscriptionGroupWrapper
	if err := protocol.DecodeJSON(body, &gw); err != nil {
		return fmt.Errorf("broker: master groups: %w", err)
	}
	if gw.DataVersion != b.groups.DataVersion() {
		before := b.groups.Names()
		if err := b.groups.Replace(gw); err != nil {
			return err
		}
		for _, n := range before {
			if gw.SubscriptionGroupTable[n] == nil {
				b.stats.ForgetGroup(n)
			}
		}
	}
	return b.syncOffsetsFrom(ctx, addr)
}

// haRuntimeInfo adds replication keys to GET_BROKER_RUNTIME_INFO:
// on a master haSlaveCount, slaveAckOffset (best slave's reported end, -1
// without one) and haLagBytes (commitlog end minus that); on a slave
// haMasterAddr, haConnected, haMasterMaxOffset and haLagBytes (the
// master's end as last seen minus the slave's).
func (b *Broker) haRuntimeInfo(t map[string]string) {
	maxOff := b.store.MaxPhysicalOffset()
	if srv := b.haSrv.Load(); srv != nil {
		t["haServerAddr"] = b.haAdvertised
		t["haSlaveCount"] = strconv.Itoa(len(srv.Slaves()))
		ack, ok := srv.AckOffset()
		t["slaveAckOffset"] = strconv.FormatInt(ack, 10)
		if ok {
			t["haLagBytes"] = strconv.FormatInt(max(0, maxOff-ack), 10)
		}
	}
	if c := b.haCli.Load(); c != nil {
		t["haMasterAddr"] = b.masterHAAddress()
		t["haConnected"] = strconv.FormatBool(c.Connected())
		if mm := c.MasterMaxOffset(); mm >= 0 {
			t["haMasterMaxOffset"] = strconv.FormatInt(mm, 10)
			t["haLagBytes"] = strconv.FormatInt(max(0, mm-maxOff), 10)
		}
		if err := c.Err(); err != nil {
			t["haLastError"] = err.Error()
		}
	}
}
