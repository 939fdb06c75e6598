package broker

import (
	"strings"
	"sync"

	"github.com/smartgo/smartgo/filter"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// SQL92 subscriptions (property filters).
//
// A consumer subscribing with expression type SQL92 has its selector
// evaluated here, on the broker, against the properties of every message
// of the queue it pulls. The consume queue's tag hash is the first cut
// where the selector implies a tag set (TAGS = 'a', TAGS IN (...)): an
// entry with another hash is skipped without reading the message. The
// other entries' records are read and the selector decides.
//
// Selectors are checked when they arrive: at HEART_BEAT (a subscription
// that does not compile is not registered, and the heartbeat answers
// SUBSCRIPTION_PARSE_FAILED naming it) and at CHECK_CLIENT_CONFIG, which
// RocketMQ's clients send when they start. Options.EnablePropertyFilter
// off refuses every SQL92 subscription.

// isTagType reports whether an expression type means tags ("" or TAG).
func isTagType(t string) bool { return t == "" || t == protocol.ExpressionTypeTag }

// maxCachedSelectors bounds the selector cache; past it the cache starts
// over (selectors come from a handful of consumer groups in practice).
const maxCachedSelectors = 1024

// selectorCache holds compiled selectors, and the errors of those that do
// not compile, by their text. The zero value is ready.
type selectorCache struct {
	mu sync.Mutex
	m  map[string]compiledSelector // protected by mu
}

type compiledSelector struct {
	e   *filter.Expression
	err error
}

func (c *selectorCache) compile(src string) (*filter.Expression, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.m[src]; ok {
		return cs.e, cs.err
	}
	// Kept, with the expression's literals (slices of it): src may be a
	// slice of a request's header (protocol.Command.Recycle).
	src = strings.Clone(src)
	e, err := filter.Compile(src)
	if c.m == nil || len(c.m) >= maxCachedSelectors {
		c.m = make(map[string]compiledSelector)
	}
	c.m[src] = compiledSelector{e: e, err: err}
	return e, err
}

// checkSubscription answers whether the broker serves a subscription:
// nil when it does, else the response refusing it.
func (b *Broker) checkSubscription(sd *protocol.SubscriptionData) *protocol.Command {
	if sd == nil || isTagType(sd.ExpressionType) {
		return nil
	}
	if sd.ExpressionType != protocol.ExpressionTypeSQL92 {
		return errResp(protocol.SystemError, "the broker does not support filtering messages by %q (use TAG or SQL92)", sd.ExpressionType)
	}
	if !b.opts.EnablePropertyFilter {
		return errResp(protocol.SystemError, "the broker does not support consumer to filter message by SQL92 (broker.enable_property_filter = false)")
	}
	if _, err := b.selectors.compile(sd.SubString); err != nil {
		return errResp(protocol.SubscriptionParseFailed, "subscription to topic %s: %v", sd.Topic, err)
	}
	return nil
}

// acceptedSubscriptions returns cd without the subscriptions the broker
// refuses (checkSubscription), and the refusal of the first of them; cd
// itself is returned when every subscription is accepted.
func (b *Broker) acceptedSubscriptions(cd *protocol.ConsumerData, clientID, peer string) (*protocol.ConsumerData, *protocol.Command) {
	var first *protocol.Command
	kept := cd.SubscriptionDataSet[:0:0]
	for _, sd := range cd.SubscriptionDataSet {
		if resp := b.checkSubscription(sd); resp != nil {
			b.plog.Warn("subscription refused", "group", cd.GroupName, "topic", sd.Topic, "type", sd.ExpressionType,
				"client", clientID, "peer", peer, "reason", resp.Remark)
			if first == nil {
				first = resp
			}
			continue
		}
		kept = append(kept, sd)
	}
	if first == nil {
		return cd, nil
	}
	c := *cd
	c.SubscriptionDataSet = kept
	return &c, first
}

// processCheckClientConfig serves CHECK_CLIENT_CONFIG: whether the broker
// accepts the subscription in the body.
func (b *Broker) processCheckClientConfig(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var body protocol.CheckClientRequestBody
	if err := protocol.DecodeJSON(req.Body, &body); err != nil {
		return errResp(protocol.SystemError, "bad check-client body: %v", err), nil
	}
	if resp := b.checkSubscription(body.SubscriptionData); resp != nil {
		b.plog.Warn("subscription refused", "group", body.Group, "topic", body.SubscriptionData.Topic,
			"client", body.ClientID, "peer", c.RemoteAddr().String(), "reason", resp.Remark)
		return resp, nil
	}
	return protocol.NewResponse(protocol.Success, ""), nil
}

// sqlFilters returns the pull filters of a SQL92 selector: the tag-hash
// first cut (nil when the selector implies no tag set) and the selector
// over each record's properties.
func (b *Broker) sqlFilters(sd *protocol.SubscriptionData) (store.TagFilter, store.RecordFilter, *protocol.Command) {
	if resp := b.checkSubscription(sd); resp != nil {
		return nil, nil, resp
	}
	e, _ := b.selectors.compile(sd.SubString) // compiled by checkSubscription
	var tf store.TagFilter
	if codes, ok := e.TagCodes(); ok {
		if len(codes) == 0 {
			tf = func(int64) bool { return false }
		} else {
			tf = store.TagSet(codes).Match
		}
	}
	return tf, func(rec []byte) bool {
		v, err := record.Parse(rec, false)
		return err == nil && e.Match(v.Properties)
	}, nil
}
