package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// maxShownBody bounds the body bytes a message answer carries.
const maxShownBody = 256 << 10

// apiMessage is a message as the API shows it: the body in base64 (JSON
// []byte), at most maxShownBody of it, with its real size.
type apiMessage struct {
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Topic          string            `json:"topic"`
	Broker         string            `json:"broker"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	Tags           string            `json:"tags"`
	Keys           []string          `json:"keys"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	BornHost       string            `json:"bornHost"`
	StoreHost      string            `json:"storeHost"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties"`
	BodySize       int               `json:"bodySize"`
	Body           []byte            `json:"body"`
	BodyUTF8       bool              `json:"bodyUtf8"` // the body shown is valid UTF-8 text
}

func toAPI(msgs []*client.MessageExt) []apiMessage {
	out := make([]apiMessage, 0, len(msgs))
	for _, m := range msgs {
		body := m.Body[:min(len(m.Body), maxShownBody)]
		keys := m.Keys
		if keys == nil {
			keys = []string{}
		}
		props := m.Properties
		if props == nil {
			props = map[string]string{}
		}
		out = append(out, apiMessage{MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Topic: m.Topic, Broker: m.Queue.BrokerName,
			QueueID: m.Queue.QueueID, QueueOffset: m.QueueOffset, Tags: m.Tags, Keys: keys, BornTimestamp: m.BornTimestamp,
			StoreTimestamp: m.StoreTimestamp, BornHost: m.BornHost.String(), StoreHost: m.StoreHost.String(),
			ReconsumeTimes: m.ReconsumeTimes, Properties: props, BodySize: len(m.Body), Body: body, BodyUTF8: utf8.Valid(body)})
	}
	return out
}

func (c *Console) apiMessageByID(w http.ResponseWriter, r *http.Request, _ *session) {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	if id == "" {
		fail(w, badf("id (an offset message id) is required"))
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	m, err := c.adm.MessageByID(ctx, id)
	if errors.Is(err, admin.ErrClientMessageID) {
		// The Message id column, copied where the offset id goes: with
		// its topic it is looked up as a UNIQ_KEY.
		if r.URL.Query().Get("topic") == "" {
			fail(w, badf("%s is a client message id (the Message id column), not an offset id: give its topic too, or use the Offset id", id))
			return
		}
		p := params{r: r}
		topic := p.topic("topic")
		if p.err != nil {
			fail(w, p.err)
			return
		}
		msgs, err := c.adm.MessagesByKey(ctx, topic, id, admin.MaxBrowse, time.Time{}, time.Time{}, true)
		if err != nil && !partial(w, err) {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, toAPI(msgs))
		return
	}
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPI([]*client.MessageExt{m}))
}

func (c *Console) apiMessagesByKey(w http.ResponseWriter, r *http.Request, _ *session) {
	p := params{r: r}
	topic, key := p.topic("topic"), p.required("key", "a message key")
	max := p.int("max", 64, 1, admin.MaxBrowse)
	if p.err != nil {
		fail(w, p.err)
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	msgs, err := c.adm.MessagesByKey(ctx, topic, key, int(max), time.Time{}, time.Time{}, r.URL.Query().Get("unique") == "1")
	if err != nil && !partial(w, err) {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPI(msgs))
}

func (c *Console) apiBrowse(w http.ResponseWriter, r *http.Request, _ *session) {
	p := params{r: r}
	topic, broker := p.topic("topic"), p.required("broker", "a broker name")
	queue, offset := p.int("queue", 0, 0, maxQueues-1), p.int("offset", 0, 0, 1<<62)
	count := p.int("count", 32, 1, admin.MaxBrowse)
	if p.err != nil {
		fail(w, p.err)
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	msgs, next, minOff, maxOff, err := c.adm.BrowseMessages(ctx, topic, broker, int32(queue), offset, int(count))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": toAPI(msgs), "next": next, "minOffset": minOff, "maxOffset": maxOff})
}

func (c *Console) apiResend(w http.ResponseWriter, r *http.Request, s *session) {
	var req struct {
		MsgID string `json:"msgId"` // offset message id
		Group string `json:"group"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.MsgID == "" || req.Group == "" {
		fail(w, badf("msgId (an offset message id) and group are required"))
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.adm.ResendToGroup(ctx, req.MsgID, req.Group); err != nil {
		fail(w, err)
		return
	}
	c.log.Info("console: message resent to a group", "msgId", req.MsgID, "group", req.Group, "user", s.user)
	writeJSON(w, http.StatusOK, map[string]any{"msgId": req.MsgID, "group": req.Group, "resent": true})
}

func (c *Console) apiMQTTNodes(w http.ResponseWriter, r *http.Request, _ *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	bs, err := c.adm.Bridges(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, bs)
}

// mqttQuery reads prefix, after and limit.
func mqttQuery(r *http.Request) (admin.MQTTQuery, error) {
	p := params{r: r}
	limit := p.int("limit", admin.DefaultMQTTLimit, 1, admin.MaxMQTTLimit)
	q := r.URL.Query()
	return admin.MQTTQuery{Prefix: q.Get("prefix"), After: q.Get("after"), Limit: int(limit)}, p.err
}

// nodes returns the node the request names, or every node.
func (c *Console) nodes(r *http.Request) ([]string, error) {
	if n := r.URL.Query().Get("node"); n != "" {
		return []string{n}, nil
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	bs, err := c.adm.Bridges(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Node)
	}
	return out, nil
}

func (c *Console) apiMQTTClients(w http.ResponseWriter, r *http.Request, _ *session) {
	q, err := mqttQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	nodes, err := c.nodes(r)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	// Every node at once; one that does not answer (hung, cut off, gone
	// but still registered) is left out and named in PartialHeader.
	pages := make([]*admin.MQTTClientPage, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages[i], errs[i] = c.adm.MQTTClients(ctx, n, q)
		}()
	}
	wg.Wait()
	out := admin.MQTTClientPage{Items: []admin.MQTTClient{}}
	var failed []string
	for i, p := range pages {
		if errs[i] != nil {
			failed = append(failed, "bridge node "+nodes[i]+": "+errs[i].Error())
			continue
		}
		out.Items = append(out.Items, p.Items...)
		out.Total += p.Total
		if p.Next != "" && (out.Next == "" || p.Next < out.Next) {
			out.Next = p.Next
		}
	}
	if len(failed) > 0 && len(failed) == len(nodes) {
		fail(w, errs[0])
		return
	}
	if len(failed) > 0 {
		setPartial(w, "some bridge nodes did not answer: "+strings.Join(failed, "; "))
	}
	writeJSON(w, http.StatusOK, out)
}

// oneNode lists from the node the request names, or any: every node holds
// the cluster's sessions and retained messages.
func (c *Console) oneNode(w http.ResponseWriter, r *http.Request, list func(node string, q admin.MQTTQuery) (any, error)) {
	q, err := mqttQuery(r)
	if err != nil {
		fail(w, err)
		return
	}
	nodes, err := c.nodes(r)
	if err != nil {
		fail(w, err)
		return
	}
	if len(nodes) == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"items": []any{}, "total": 0})
		return
	}
	// The first node that answers: one that does not (hung, cut off)
	// hands over to the next, unless the request named it.
	var errs []string
	var last error
	for _, n := range nodes {
		out, err := list(n, q)
		if err == nil {
			if len(errs) > 0 {
				setPartial(w, "answered by bridge node "+n+"; before it: "+strings.Join(errs, "; "))
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		last = err
		if errors.Is(err, client.ErrBadOptions) || r.Context().Err() != nil {
			break // the next node would say the same, or nobody is waiting
		}
		errs = append(errs, "bridge node "+n+": "+err.Error())
	}
	fail(w, last)
}

func (c *Console) apiMQTTSessions(w http.ResponseWriter, r *http.Request, _ *session) {
	c.oneNode(w, r, func(node string, q admin.MQTTQuery) (any, error) {
		ctx, cancel := c.ctx(r)
		defer cancel()
		return c.adm.MQTTSessions(ctx, node, q)
	})
}

func (c *Console) apiMQTTRetained(w http.ResponseWriter, r *http.Request, _ *session) {
	c.oneNode(w, r, func(node string, q admin.MQTTQuery) (any, error) {
		ctx, cancel := c.ctx(r)
		defer cancel()
		return c.adm.MQTTRetained(ctx, node, q)
	})
}

func (c *Console) apiMQTTDisconnect(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("client")
	var req struct {
		Node string `json:"node"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req); err != nil {
			fail(w, err)
			return
		}
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	node, err := c.adm.DisconnectMQTTClient(ctx, req.Node, id)
	if err != nil {
		fail(w, err)
		return
	}
	c.log.Info("console: MQTT client disconnected", "client", id, "node", node, "user", s.user)
	writeJSON(w, http.StatusOK, map[string]any{"clientId": id, "node": node, "disconnected": true})
}

func (c *Console) apiStateStoreKeys(w http.ResponseWriter, r *http.Request, _ *session) {
	p := params{r: r}
	limit := p.int("limit", 100, 1, admin.MaxStateStoreLimit)
	if p.err != nil {
		fail(w, p.err)
		return
	}
	q := r.URL.Query()
	sq := admin.StateStoreQuery{Prefix: []byte(q.Get("prefix")), Limit: int(limit)}
	if a := q.Get("after"); a != "" {
		sq.After = []byte(a)
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	page, err := c.adm.StateStoreKeys(ctx, sq)
	if err != nil && !partial(w, err) {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// apiSeries serves chart data: ?names=a,b (exact series) and/or
// ?prefix=topic:&top=8 (the busiest series of a kind), points after
// ?since (Unix ms).
func (c *Console) apiSeries(w http.ResponseWriter, r *http.Request, _ *session) {
	q := r.URL.Query()
	p := params{r: r}
	top, since := p.int("top", 0, 0, 50), p.int("since", 0, 0, 1<<62)
	if p.err != nil {
		fail(w, p.err)
		return
	}
	var names []string
	if n := q.Get("names"); n != "" {
		names = strings.Split(n, ",")
		if len(names) > 50 {
			fail(w, badf("at most 50 names"))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"intervalMs": c.opts.SampleInterval.Milliseconds(),
		"series": c.sampler.query(names, q.Get("prefix"), int(top), since)})
}

// asset is one embedded file, with its gzip form and ETag.
type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

// assetHandler serves the embedded pages: / is index.html; every other
// path is a file under assets/ (404 otherwise). Files are sent gzipped
// when the browser accepts it, with an ETag so a reload costs a 304.
func assetHandler() http.Handler {
	files := map[string]*asset{}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		sum := sha256.Sum256(b)
		ct := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
			".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}[path.Ext(p)]
		files["/"+strings.TrimPrefix(p, "assets/")] = &asset{body: b, gz: gz.Bytes(), contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if p == "/" {
			p = "/index.html"
		}
		a := files[p]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("Vary", "Accept-Encoding")
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			_, _ = w.Write(a.gz)
			return
		}
		_, _ = w.Write(a.body)
	})
}
