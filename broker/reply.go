package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Request-reply (RocketMQ 4.6+; the wire is described in
// remoting/protocol/headers_reply.go).
//
// A responder sends its reply with SEND_REPLY_MESSAGE (324) or
// SEND_REPLY_MESSAGE_V2 (325), normally to the cluster's reply topic. The
// broker pushes it at once, with PUSH_REPLY_MESSAGE_TO_CLIENT (326), to
// the connection of the producer that REPLY_TO_CLIENT names (it must have
// sent this broker a heartbeat or a request; if not, the reply is handed
// to the broker of the cluster that has it, see reply_forward.go), and
// then stores it in the topic, as
// RocketMQ does, so a reply is on record whether or not it reached the
// requester. The responder gets SUCCESS when the push was answered, and
// SYSTEM_ERROR with the reason (requester not connected here, push
// failed or timed out) when not; the latter is logged (rate-limited), and
// nothing else is affected. No worker waits for the requester: its answer
// to the push arrives on a callback, which stores the reply and answers
// the responder.

// replyPushTimeout bounds the wait for the requester's answer to a push
// (the responder's send is answered then).
const replyPushTimeout = 3 * time.Second

// errReplyNoClient: the reply names no requester connected here.
var errReplyNoClient = errors.New("broker: the requesting client is not connected to this broker")

// processSendReply serves SEND_REPLY_MESSAGE (324) and
// SEND_REPLY_MESSAGE_V2 (325).
func (b *Broker) processSendReply(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	h, err := protocol.DecodeSendMessageHeader(req)
	if err != nil {
		return errResp(protocol.SystemError, "bad reply header: %v", err), nil
	}
	if resp := b.checkSendable(h.Topic); resp != nil {
		return resp, nil
	}
	tc, resp := b.sendTopicConfig(h)
	if resp != nil {
		return resp, nil
	}
	queueID := h.QueueID
	if queueID < 0 {
		if tc.WriteQueueNums <= 0 {
			return noWriteQueue(tc), nil
		}
		queueID = int32(b.queueRR.Add(1) % uint32(tc.WriteQueueNums))
	}
	if queueID >= max(tc.WriteQueueNums, tc.ReadQueueNums) {
		return errResp(protocol.SystemError, "request queueId[%d] is illegal, topic %s has %d write and %d read queues",
			queueID, h.Topic, tc.WriteQueueNums, tc.ReadQueueNums), nil
	}
	target, _ := record.LookupPropertyString(h.Properties, record.PropertyReplyToClient)
	finish := func(pushErr error) *protocol.Command { return b.storeReply(c, h, queueID, req.Body, target, pushErr) }
	if target == "" {
		return finish(fmt.Errorf("the reply has no %s property", record.PropertyReplyToClient)), nil
	}
	ph := b.replyPushHeader(c, h)
	conn := b.producerConn(target)
	if conn == nil {
		// Not connected here: another broker of the cluster may have the
		// requester (reply_forward.go).
		if len(b.opts.Registries) == 0 {
			return finish(fmt.Errorf("%w: client %s (it left, or never sent this broker a heartbeat)", errReplyNoClient, target)), nil
		}
		if !b.fwd.start(func(ctx context.Context) {
			_ = c.WriteResponse(req, finish(b.forwardReply(ctx, ph, req.Body, target)))
		}) {
			return finish(fmt.Errorf("%w: client %s: %w", errReplyNoClient, target, errReplyForwardBusy)), nil
		}
		return nil, nil // answered by the forward
	}
	push := protocol.NewRequest(protocol.PushReplyMessageToClient, ph, req.Body)
	push.SerializeType = protocol.SerializeJSON
	// The requester's answer comes back on its own goroutine, and the
	// push never waits for the requester's socket: no worker waits for a
	// slow or stuck requester (one not reading is refused at once).
	err = conn.InvokeNoWait(push, replyPushTimeout, func(resp *protocol.Command, err error) {
		switch {
		case err != nil:
			err = fmt.Errorf("push reply message to %s (%s): %w", target, conn.RemoteAddr(), err)
		case resp.Code != protocol.Success:
			err = fmt.Errorf("client %s answered the pushed reply with code %d (%s)", target, resp.Code, resp.Remark)
		}
		if resp != nil {
			resp.Recycle()
		}
		_ = c.WriteResponse(req, finish(err))
	})
	if err != nil {
		return finish(fmt.Errorf("push reply message to %s (%s): %w", target, conn.RemoteAddr(), err)), nil
	}
	return nil, nil // answered by the callback
}

// storeReply stores a reply in its topic once its push is over (pushErr
// nil: the requester took it) and returns the responder's answer.
func (b *Broker) storeReply(c *remoting.Conn, h *protocol.SendMessageRequestHeader, queueID int32, body []byte,
	target string, pushErr error) *protocol.Command {
	corr, _ := record.LookupPropertyString(h.Properties, record.PropertyCorrelationID)
	m := &record.Message{
		Topic: h.Topic, QueueID: queueID, Flag: h.Flag, SysFlag: h.SysFlag &^ record.TxMask, BornTimestamp: h.BornTimestamp,
		BornHost: peerAddr(c), ReconsumeTimes: h.ReconsumeTimes, Body: body,
	}
	m.Properties, _ = storedProperties(h.Properties, b.opts.ClusterName)
	ctx, cancel := context.WithTimeout(context.Background(), putTimeout)
	defer cancel()
	res, putErr := b.put(ctx, m, false)
	if putErr == nil {
		b.stats.AddPut(m.Topic, 1, int64(len(m.Body)))
	} else {
		b.log.Error("reply message not stored", "topic", h.Topic, "correlationId", corr, "err", putErr)
	}
	var out *protocol.Command
	if pushErr != nil {
		b.plog.Warn("reply not delivered", "replyTo", target, "correlationId", corr, "topic", h.Topic,
			"from", c.RemoteAddr().String(), "reason", pushErr.Error())
		out = errResp(protocol.SystemError, "push reply message fail: %v", pushErr)
	} else {
		out = protocol.NewResponse(protocol.Success, "")
	}
	rh := &protocol.SendMessageResponseHeader{MsgID: "0", QueueID: queueID, Region: "DefaultRegion", TraceOn: true}
	if putErr == nil {
		rh.MsgID, rh.QueueOffset = res.MsgID(), res.QueueOffset
	}
	out.SetHeader(rh)
	return out
}

// replyPushHeader builds the header of the push of a reply sent with
// header h on connection from.
func (b *Broker) replyPushHeader(from *remoting.Conn, h *protocol.SendMessageRequestHeader) *protocol.ReplyMessageRequestHeader {
	now := b.now().UnixMilli()
	return &protocol.ReplyMessageRequestHeader{
		ProducerGroup: h.ProducerGroup, Topic: h.Topic, DefaultTopic: h.DefaultTopic,
		DefaultTopicQueueNums: h.DefaultTopicQueueNums, QueueID: h.QueueID, SysFlag: h.SysFlag,
		BornTimestamp: h.BornTimestamp, Flag: h.Flag,
		Properties:     appendProperty(h.Properties, record.PropertyPushReplyTime, strconv.FormatInt(now, 10)),
		ReconsumeTimes: h.ReconsumeTimes, UnitMode: h.UnitMode,
		BornHost: peerAddr(from).String(), StoreHost: b.storeHost.String(), StoreTimestamp: now,
	}
}

// registerRequester registers the requester of a request message (a send
// carrying REPLY_TO_CLIENT) on the connection c it came on, as its
// heartbeat would, unless the client is registered already: a reply
// arriving here can then be pushed to it at once. rocketmq-client-go
// v2.1.2 sends no heartbeat to a broker whose route it has just learnt
// (only every 30 s), so without this its first requests would time out.
// group and clientID alias the request's buffer: they are copied when
// kept.
func (b *Broker) registerRequester(c *remoting.Conn, req *protocol.Command, group, clientID string) {
	if group == "" || b.producers.known(clientID) {
		return // the common case: no allocation
	}
	info := clientInfo(c, req, strings.Clone(clientID), b)
	if b.producers.RegisterRequester(strings.Clone(group), info) {
		b.plog.Debug("requester registered by its request", "group", group, "client", clientID, "peer", info.Addr)
	}
}

// producerConn returns the connection of the producer client id, or nil.
func (b *Broker) producerConn(clientID string) *remoting.Conn {
	ci, ok := b.producers.Find(clientID)
	if !ok {
		return nil
	}
	conn, _ := ci.Channel.(*remoting.Conn)
	return conn
}
