package broker

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/ha"
)

// Metadata change notices (NOTIFY_METADATA_CHANGED, 9140).
//
// A slave copies its master's topics, groups and offsets every
// SlaveSyncInterval (slaveSyncLoop); a topic's permission, queue count or
// a group's retry settings changed on the master since the last copy
// would be lost if the slave were promoted before the next one. So a
// master tells its connected slaves as soon as its topic or group table
// changed: every data version bump wakes notifySlavesLoop, which sends the
// notice one way to each slave's remoting address (given in its HA
// hello); the slave's sync loop then copies at once. Bumps coalesce (one
// notice per slave per round), a slave copies from the master it follows
// and takes the notice only from that master's host, and a master without
// slaves does nothing. The master sends to the port the slave's HA hello
// names, on the IP the HA connection comes from: never to another host. A
// slave disconnected at the time of a change gets no notice: it copies
// after each HA handshake instead.
//
// Consumer and delay offsets change far more often (each commit, each
// delayed message delivered): a change wakes notifyOffsetsLoop, which
// sends the same notice with the ext field scope=offsets, at most once
// per offsetNoticeInterval (the changes in between coalesce into the
// next notice); the notice carries the offsets changed since the last
// one, which the slave applies (offsetdelta.go), or, when the slave
// cannot (it missed a notice, or the master did not journal a change),
// the slave copies all the offsets (GET_ALL_CONSUMER_OFFSET,
// GET_ALL_DELAY_OFFSET). After a failover the
// promoted slave so has the offsets committed up to about
// offsetNoticeInterval before the master died, not SlaveSyncInterval. A
// slave that does not know the field copies everything.

// metaNoticeTimeout bounds the dial and write of one notice.
const metaNoticeTimeout = 2 * time.Second

// offsetNoticeInterval is the least time between two offset notices to a
// master's slaves: a busy consumer costs each slave at most a few copies
// of the offset tables a second.
const offsetNoticeInterval = 250 * time.Millisecond

// Ext field of NOTIFY_METADATA_CHANGED naming what changed: absent for
// topics and groups (copy everything), noticeScopeOffsets for offsets.
const (
	fieldNoticeScope   = "scope"
	noticeScopeOffsets = "offsets"
)

// offsetsChanged is the offset tables' change hook: it wakes
// notifyOffsetsLoop without blocking, on a master (a slave connecting
// later copies everything at its handshake).
func (b *Broker) offsetsChanged() {
	if b.haSrv.Load() != nil {
		kick(b.offsetKick)
	}
}

// metaChanged is the topic and group tables' bump hook: it wakes
// notifySlavesLoop without blocking.
func (b *Broker) metaChanged() { kick(b.metaKick) }

// notifySlavesLoop sends the change notice to the connected slaves after
// each change, until ctx ends.
func (b *Broker) notifySlavesLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.metaKick:
		}
		b.noticeSlaves(ctx, func() *protocol.Command { return protocol.NewRequest(protocol.NotifyMetadataChanged, nil, nil) })
	}
}

// notifyOffsetsLoop sends the offsets' change notice to the connected
// slaves after each change, at most once per offsetNoticeInterval, until
// ctx ends.
func (b *Broker) notifyOffsetsLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.offsetKick:
		}
		mk, err := b.offsetNotice()
		if err != nil {
			b.plog.Warn("cannot make the offset notice", "err", err)
		} else {
			b.noticeSlaves(ctx, mk)
		}
		t.Reset(offsetNoticeInterval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// noticeSlaves sends the notice mk makes one way to each connected
// slave.
func (b *Broker) noticeSlaves(ctx context.Context, mk func() *protocol.Command) {
	srv := b.haSrv.Load()
	if srv == nil {
		return
	}
	for _, s := range srv.Slaves() {
		if s.BrokerAddr == "" {
			continue // a slave too old to take the notice
		}
		addr := noticeAddr(s)
		if addr == "" {
			b.plog.Warn("a slave's HA hello names no usable remoting address", "slave", s.Addr, "claimed", s.BrokerAddr)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, metaNoticeTimeout)
		err := b.client.InvokeOneway(cctx, addr, mk())
		cancel()
		if err != nil {
			b.plog.Warn("cannot tell a slave its master's metadata changed", "slave", addr, "err", err)
		}
	}
}

// processMetadataChanged serves NOTIFY_METADATA_CHANGED: a slave copies
// its master's metadata (or only its offsets) now. The notice is taken
// only from the host of the master the slave follows (fromMaster): any
// other peer could otherwise make the slave copy as often as it sends,
// and an offset notice's body is applied as it comes (offsetdelta.go).
//
// A multi-homed master whose connections to the slave leave from another
// IP than those of its registered remoting and HA addresses has its
// notices refused: its slaves then copy every SlaveSyncInterval and after
// each HA handshake only, as before notices existed. Taking a notice from
// any IP that names the master's broker name or id would not be safe:
// nothing in the notice authenticates it, and a forged offset notice
// would set the consumer offsets a failover hands to consumers. The
// remedy is the master's advertise_ip (its registered address) on the
// interface it reaches its slaves from; the refusal's log line says so.
func (b *Broker) processMetadataChanged(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	if b.isSlave() {
		if !b.fromMaster(c) {
			b.plog.Warn("refused a metadata change notice not from this slave's master "+
				"(a multi-homed master: advertise the IP it reaches its slaves from; until then the slave copies every slave_sync_interval)",
				"peer", c.RemoteAddr().String(), "master", b.masterRemotingAddr())
			return errResp(protocol.NoPermission, "NOTIFY_METADATA_CHANGED is taken only from this slave's master"), nil
		}
		if req.ExtFields[fieldNoticeScope] == noticeScopeOffsets {
			if !b.applyOffsetDelta(req) {
				kick(b.offsetSyncKick)
			}
		} else {
			b.kickSync()
		}
	}
	return protocol.NewResponse(protocol.Success, ""), nil
}

// fromMaster reports whether c comes from the host of the master this
// slave follows: its remote IP is that of the master's remoting address
// or of its HA address (registries', the controller's or the HA
// handshake's view). False while the slave knows no master.
func (b *Broker) fromMaster(c *remoting.Conn) bool {
	ap, ok := c.RemoteAddrPort()
	if !ok {
		return false
	}
	peer := ap.Addr().Unmap()
	for _, a := range []string{b.masterRemotingAddr(), b.masterHAAddress()} {
		if ip, ok := hostIP(a); ok && ip == peer {
			return true
		}
	}
	return false
}

// hostIP is the IP of a host:port address; false for a host name or a
// malformed address.
func hostIP(addr string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// noticeAddr is where a master sends a slave's notices: the port its HA
// hello names (Slave.BrokerAddr) on the IP its HA connection comes from
// (Slave.Addr), so a hello cannot make the master dial another host; ""
// when either address is malformed.
func noticeAddr(s ha.Slave) string {
	ip, ok := hostIP(s.Addr)
	if !ok {
		return ""
	}
	_, port, err := net.SplitHostPort(s.BrokerAddr)
	if err != nil || port == "" {
		return ""
	}
	return net.JoinHostPort(ip.String(), port)
}

// kick wakes the loop that waits on ch (capacity 1) without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// kickSync makes the slave's sync loop copy its master's metadata now:
// on a notice, and after each HA handshake (ha.Options.OnConnected), as
// a master notices only the slaves connected at the time of a change.
func (b *Broker) kickSync() { kick(b.syncKick) }
