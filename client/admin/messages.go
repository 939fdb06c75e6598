package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// ErrClientMessageID is MessageByID's error (with client.ErrBadMessage)
// for an id that is no offset id but is a client message id (UNIQ_KEY,
// the MSG_ID column of message listings, as long as an offset id for
// IPv4): MessagesByKey with unique finds it, given its topic.
var ErrClientMessageID = errors.New("admin: a client message id (MSG_ID, UNIQ_KEY), not an offset id (OFFSET_MSG_ID)")

// MessageByID returns the message with an offset message id (as a send
// result's OffsetMsgID), read from the broker the id names, or, when that
// broker does not answer (it died and its slave took over), from the
// replica that holds the same record (see fromReplica).
func (a *Admin) MessageByID(ctx context.Context, offsetMsgID string) (*client.MessageExt, error) {
	m, _, err := a.messageByID(ctx, offsetMsgID)
	return m, err
}

// messageByID is MessageByID that also names the broker group of the
// replica the message was read from when the broker the id names did not
// answer ("" when it did).
func (a *Admin) messageByID(ctx context.Context, offsetMsgID string) (*client.MessageExt, string, error) {
	host, off, err := record.ParseOffsetMessageID(offsetMsgID)
	if err != nil {
		if _, _, _, _, uerr := record.ParseUniqueID(offsetMsgID); uerr == nil {
			return nil, "", fmt.Errorf("%w: %w: %w", client.ErrBadMessage, ErrClientMessageID, err)
		}
		return nil, "", fmt.Errorf("%w: %w", client.ErrBadMessage, err)
	}
	addr := host.String()
	resp, err := a.invokeOK(ctx, "view message", addr, protocol.NewRequest(protocol.ViewMessageByID, &protocol.ViewMessageRequestHeader{Offset: off}, nil))
	if err != nil {
		var be *client.BrokerError
		if errors.As(err, &be) {
			return nil, "", fmt.Errorf("%w: message %s: %w", client.ErrNotFound, offsetMsgID, err)
		}
		if m, group := a.fromReplica(ctx, host, off); m != nil {
			return m, group, nil
		}
		return nil, "", err
	}
	msgs, err := client.DecodeMessages(resp.Body, a.brokerNameOf(ctx, addr))
	if err != nil {
		return nil, "", err
	}
	if len(msgs) == 0 {
		return nil, "", fmt.Errorf("%w: message %s", client.ErrNotFound, offsetMsgID)
	}
	return msgs[0], "", nil
}

func (a *Admin) brokerNameOf(ctx context.Context, addr string) string {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return ""
	}
	for name, bd := range ci.BrokerAddrTable {
		for _, ad := range bd.BrokerAddrs {
			if ad == addr {
				return name
			}
		}
	}
	return ""
}

// MessagesByKey queries every broker of the topic for messages whose KEYS
// (or, with unique, UNIQ_KEY) contain key, stored between begin and end.
// Broker groups that do not answer leave their messages out: the answer
// then comes with an ErrPartial error naming them (an error alone when
// none answered).
func (a *Admin) MessagesByKey(ctx context.Context, topic, key string, maxNum int, begin, end time.Time, unique bool) ([]*client.MessageExt, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	if end.IsZero() {
		end = time.Now().Add(time.Minute)
	}
	if maxNum <= 0 {
		maxNum = 64
	}
	var bs []Broker
	for _, bd := range rd.BrokerDatas {
		if addr := readAddr(bd); addr != "" { // the master, or a slave while there is none
			bs = append(bs, Broker{Cluster: bd.Cluster, Name: bd.BrokerName, Addr: addr})
		}
	}
	var out []*client.MessageExt
	perr := a.fromEach(ctx, "query message", bs, func() *protocol.Command {
		h := &protocol.QueryMessageRequestHeader{Topic: topic, Key: key, MaxNum: int32(maxNum), BeginTimestamp: begin.UnixMilli(),
			EndTimestamp: end.UnixMilli(), UniqueKeyQuery: unique}
		return protocol.NewRequest(protocol.QueryMessage, h, nil)
	}, func(b Broker, resp *protocol.Command) error {
		if resp.Code == protocol.QueryNotFound {
			return nil
		}
		if err := okAnswer("query message", b.Addr, resp); err != nil {
			return err
		}
		msgs, err := client.DecodeMessages(resp.Body, b.Name)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Topic != topic {
				continue
			}
			if unique && m.MsgID != key {
				continue
			}
			if !unique && !contains(m.Keys, key) {
				continue
			}
			out = append(out, m)
		}
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StoreTimestamp < out[j].StoreTimestamp })
	return out, perr
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
