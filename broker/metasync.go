package broker

import (
	"context"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
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
// whoever sent the notice, and a master without slaves does nothing. A
// slave disconnected at the time of a change gets no notice: it copies
// after each HA handshake instead.

// metaNoticeTimeout bounds the dial and write of one notice.
const metaNoticeTimeout = 2 * time.Second

// metaChanged is the topic and group tables' bump hook: it wakes
// notifySlavesLoop without blocking.
func (b *Broker) metaChanged() {
	select {
	case b.metaKick <- struct{}{}:
	default:
	}
}

// notifySlavesLoop sends the change notice to the connected slaves after
// each change, until ctx ends.
func (b *Broker) notifySlavesLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.metaKick:
		}
		srv := b.haSrv.Load()
		if srv == nil {
			continue
		}
		for _, s := range srv.Slaves() {
			if s.BrokerAddr == "" {
				continue // a slave too old to take the notice
			}
			cctx, cancel := context.WithTimeout(ctx, metaNoticeTimeout)
			err := b.client.InvokeOneway(cctx, s.BrokerAddr, protocol.NewRequest(protocol.NotifyMetadataChanged, nil, nil))
			cancel()
			if err != nil {
				b.plog.Warn("cannot tell a slave its master's metadata changed", "slave", s.BrokerAddr, "err", err)
			}
		}
	}
}

// processMetadataChanged serves NOTIFY_METADATA_CHANGED: a slave copies
// its master's metadata now.
func (b *Broker) processMetadataChanged(_ *remoting.Conn, _ *protocol.Command) (*protocol.Command, error) {
	if b.isSlave() {
		b.kickSync()
	}
	return protocol.NewResponse(protocol.Success, ""), nil
}

// kickSync makes the slave's sync loop copy its master's metadata now:
// on a notice, and after each HA handshake (ha.Options.OnConnected), as
// a master notices only the slaves connected at the time of a change.
func (b *Broker) kickSync() {
	select {
	case b.syncKick <- struct{}{}:
	default:
	}
}
