package protocol

import (
	"errors"
	"strconv"
)

// Request-reply (RocketMQ 4.6+).
//
// A requester sends an ordinary message whose properties carry
// CORRELATION_ID (a fresh id per request), REPLY_TO_CLIENT (the
// requester's client id) and TTL. The responder answers with a message to
// "<cluster>_REPLY_TOPIC" (the cluster from the request's CLUSTER
// property, which the broker adds to every stored message) with MSG_TYPE
// "reply" and the same CORRELATION_ID and REPLY_TO_CLIENT, sent as
// SEND_REPLY_MESSAGE (324, SendMessageRequestHeader's long names) or
// SEND_REPLY_MESSAGE_V2 (325, the short names of SEND_MESSAGE_V2). The
// broker pushes it to the connection of the client REPLY_TO_CLIENT names
// with PUSH_REPLY_MESSAGE_TO_CLIENT (326): ReplyMessageRequestHeader
// below, the reply's body as the frame body; the client answers SUCCESS.

// ReplyTopicSuffix ends the name of a cluster's reply topic.
const ReplyTopicSuffix = "_REPLY_TOPIC"

// ReplyTopic returns the reply topic of a cluster: "<cluster>_REPLY_TOPIC".
func ReplyTopic(cluster string) string { return cluster + ReplyTopicSuffix }

// ReplyMessageFlag is the MSG_TYPE property value of a reply message.
const ReplyMessageFlag = "reply"

// ReplyMessageRequestHeader is PUSH_REPLY_MESSAGE_TO_CLIENT (326, broker
// to requesting client): producerGroup!, topic!, defaultTopic!,
// defaultTopicQueueNums!, queueId!, sysFlag!, bornTimestamp!, flag!,
// properties, reconsumeTimes, unitMode, bornHost! ("ip:port" of the
// responder's connection), storeHost! ("ip:port" of the broker),
// storeTimestamp! (ms). Everything but the hosts and the store time is
// copied from the responder's send header. Java's client refuses the
// frame if a required key is missing, so required strings are written
// even when empty.
type ReplyMessageRequestHeader struct {
	ProducerGroup         string
	Topic                 string
	DefaultTopic          string
	DefaultTopicQueueNums int32
	QueueID               int32
	SysFlag               int32
	BornTimestamp         int64
	Flag                  int32
	Properties            string
	ReconsumeTimes        int32
	UnitMode              bool
	BornHost              string
	StoreHost             string
	StoreTimestamp        int64
}

// EncodeFields implements HeaderEncoder.
func (h *ReplyMessageRequestHeader) EncodeFields(f ExtFields) {
	f["producerGroup"] = h.ProducerGroup
	f["topic"] = h.Topic
	f["defaultTopic"] = h.DefaultTopic
	putI32(f, "defaultTopicQueueNums", h.DefaultTopicQueueNums)
	putI32(f, "queueId", h.QueueID)
	putI32(f, "sysFlag", h.SysFlag)
	putI64(f, "bornTimestamp", h.BornTimestamp)
	putI32(f, "flag", h.Flag)
	putOptStr(f, "properties", h.Properties)
	putI32(f, "reconsumeTimes", h.ReconsumeTimes)
	putBool(f, "unitMode", h.UnitMode)
	f["bornHost"] = h.BornHost
	f["storeHost"] = h.StoreHost
	putI64(f, "storeTimestamp", h.StoreTimestamp)
}

// DecodeFields implements HeaderDecoder.
func (h *ReplyMessageRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "ReplyMessageRequestHeader"}
	h.ProducerGroup = r.str("producerGroup", true)
	h.Topic = r.str("topic", true)
	h.DefaultTopic = r.str("defaultTopic", true)
	h.DefaultTopicQueueNums = r.i32("defaultTopicQueueNums", true)
	h.QueueID = r.i32("queueId", true)
	h.SysFlag = r.i32("sysFlag", true)
	h.BornTimestamp = r.i64("bornTimestamp", true)
	h.Flag = r.i32("flag", true)
	h.Properties = r.str("properties", false)
	h.ReconsumeTimes = r.i32("reconsumeTimes", false)
	h.UnitMode = r.boolean("unitMode", false)
	h.BornHost = r.str("bornHost", true)
	h.StoreHost = r.str("storeHost", true)
	h.StoreTimestamp = r.i64("storeTimestamp", true)
	return r.err
}

// ForwardReplyMessage is SmartGo's own request code, broker to broker,
// in its private range beside the twins' (9120-9122). A broker that takes
// a reply (SEND_REPLY_MESSAGE) for a requester not connected to it hands
// the reply to the other master brokers of its cluster, one at a time, with
// this code; the broker the requester is connected to pushes it
// (PUSH_REPLY_MESSAGE_TO_CLIENT) unchanged. Header: every field of
// ReplyMessageRequestHeader, exactly as the push will carry them (the
// store host and time are the first broker's, which stores the reply),
// plus pushTimeoutMillis! (decimal ms: how long the receiving broker may
// wait for the requester's answer to its push). Body: the reply's body.
// Answers: Success once the requester answered the push with Success;
// QueryNotFound (22) when the requester is not connected to the receiving
// broker; SystemError with the reason when the push failed, timed out or
// the header is malformed. A receiving broker never forwards the reply
// again, so a forward makes at most one hop.
const ForwardReplyMessage RequestCode = 9130

// ForwardReplyHeader is the header of ForwardReplyMessage: the push's
// header and how long the receiver may wait for the requester.
type ForwardReplyHeader struct {
	ReplyMessageRequestHeader
	PushTimeoutMillis int64
}

// EncodeFields implements HeaderEncoder.
func (h *ForwardReplyHeader) EncodeFields(f ExtFields) {
	h.ReplyMessageRequestHeader.EncodeFields(f)
	putI64(f, "pushTimeoutMillis", h.PushTimeoutMillis)
}

// DecodeFields implements HeaderDecoder. A timeout below 1 ms is
// ErrBadField.
func (h *ForwardReplyHeader) DecodeFields(f ExtFields) error {
	if err := h.ReplyMessageRequestHeader.DecodeFields(f); err != nil {
		return err
	}
	r := fieldReader{f: f, hdr: "ForwardReplyHeader"}
	h.PushTimeoutMillis = r.i64("pushTimeoutMillis", true)
	if r.err == nil && h.PushTimeoutMillis < 1 {
		r.bad("pushTimeoutMillis", strconv.FormatInt(h.PushTimeoutMillis, 10), errTimeoutBelow1ms)
	}
	return r.err
}

var errTimeoutBelow1ms = errors.New("below 1 ms")
