package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// The JSON API (docs/console.md). Every answer is JSON; an error is
// {"error": "..."} with a 4xx status for a bad request (400 bad input, 401
// not logged in, 403 role or CSRF, 404 unknown, 413 body too large, 415
// not JSON, 429 too many failed logins) and 502/504 when the cluster did
// not answer.

// maxBody bounds a request body.
const maxBody = 1 << 20

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// badRequest is a caller's mistake found by the console: 400.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return badRequest{fmt.Sprintf(format, args...)} }

// fail writes the error of an API call with the status its kind calls
// for.
func fail(w http.ResponseWriter, err error) {
	var br badRequest
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &br), errors.Is(err, client.ErrBadOptions), errors.Is(err, client.ErrBadMessage):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", mbe.Limit))
	case errors.Is(err, client.ErrNotFound), errors.Is(err, client.ErrTopicNotExist), errors.Is(err, client.ErrGroupNotExist),
		errors.Is(err, client.ErrNoRoute):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, client.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, err.Error())
	case errors.Is(err, client.ErrNoPermission):
		// The broker answered and refused (a system topic's deletion):
		// not a failure of the gateway a retry could mend.
		writeError(w, http.StatusForbidden, err.Error())
	default:
		writeError(w, http.StatusBadGateway, err.Error())
	}
}

// params reads query parameters, keeping the first mistake in err (a
// badRequest naming the parameter).
type params struct {
	r   *http.Request
	err error
}

func (p *params) set(err error) {
	if p.err == nil {
		p.err = err
	}
}

// int reads an integer in [lo, hi], def when absent.
func (p *params) int(name string, def, lo, hi int64) int64 {
	s := p.r.URL.Query().Get(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		p.set(badf("%s must be an integer between %d and %d, not %q", name, lo, hi, s))
	}
	return v
}

// required reads a parameter that must be present.
func (p *params) required(name, what string) string {
	v := p.r.URL.Query().Get(name)
	if v == "" {
		p.set(badf("%s (%s) is required", name, what))
	}
	return v
}

// topic reads a topic name, checked against the brokers' rule.
func (p *params) topic(name string) string {
	v := p.r.URL.Query().Get(name)
	if err := client.ValidateTopic(v); err != nil {
		p.set(badRequest{name + ": " + err.Error()})
	}
	return v
}

// decodeBody reads a JSON body into v.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badf("bad JSON body: %v", err)
	}
	return nil
}

func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.opts.RequestTimeout)
}

// routes builds the handler: pages, then the API behind the guard.
func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	g := c.auth.guard
	mux.Handle("/", assetHandler())
	mux.HandleFunc("POST /api/login", c.auth.handleLogin)
	mux.HandleFunc("GET /api/session", c.apiSession)
	mux.HandleFunc("POST /api/logout", g(false, c.auth.handleLogout))
	mux.HandleFunc("GET /api/cluster", g(false, c.apiCluster))
	mux.HandleFunc("GET /api/topics", g(false, c.apiTopics))
	mux.HandleFunc("POST /api/topics", g(true, c.apiPutTopic))
	mux.HandleFunc("PUT /api/topics/{topic}", g(true, c.apiPutTopic))
	mux.HandleFunc("DELETE /api/topics/{topic}", g(true, c.apiDeleteTopic))
	mux.HandleFunc("GET /api/topics/{topic}/route", g(false, c.apiTopicRoute))
	mux.HandleFunc("GET /api/topics/{topic}/stats", g(false, c.apiTopicStats))
	mux.HandleFunc("GET /api/groups", g(false, c.apiGroups))
	mux.HandleFunc("GET /api/groups/{group}", g(false, c.apiGroup))
	mux.HandleFunc("POST /api/groups/{group}/reset", g(true, c.apiResetOffset))
	mux.HandleFunc("GET /api/messages/by-id", g(false, c.apiMessageByID))
	mux.HandleFunc("GET /api/messages/by-key", g(false, c.apiMessagesByKey))
	mux.HandleFunc("GET /api/messages/browse", g(false, c.apiBrowse))
	mux.HandleFunc("POST /api/messages/resend", g(true, c.apiResend))
	mux.HandleFunc("GET /api/mqtt/nodes", g(false, c.apiMQTTNodes))
	mux.HandleFunc("GET /api/mqtt/clients", g(false, c.apiMQTTClients))
	mux.HandleFunc("GET /api/mqtt/sessions", g(false, c.apiMQTTSessions))
	mux.HandleFunc("GET /api/mqtt/retained", g(false, c.apiMQTTRetained))
	mux.HandleFunc("POST /api/mqtt/clients/{client}/disconnect", g(true, c.apiMQTTDisconnect))
	mux.HandleFunc("GET /api/amqp/queues", g(false, c.apiAMQPQueues))
	mux.HandleFunc("GET /api/amqp/connections", g(false, c.apiAMQPConnections))
	mux.HandleFunc("POST /api/amqp/queues/purge", g(true, c.apiAMQPPurge))
	mux.HandleFunc("POST /api/amqp/connections/close", g(true, c.apiAMQPClose))
	mux.HandleFunc("GET /api/statestore/keys", g(false, c.apiStateStoreKeys))
	mux.HandleFunc("GET /api/twins", g(false, c.apiDevices))
	mux.HandleFunc("GET /api/twins/{device}", g(false, c.apiTwin))
	mux.HandleFunc("GET /api/series", g(false, c.apiSeries))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API call: "+r.Method+" "+r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			mux.ServeHTTP(sw, r)
			c.metrics.requests.WithLabelValues(strconv.Itoa(sw.code/100) + "xx").Inc()
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// PartialHeader is set on an answer built from the broker groups that
// answered when others did not (a dead or hung broker): its value says
// which did not, and the pages show it above their tables.
const PartialHeader = "X-SmartGo-Partial"

// partial reports whether err is admin.ErrPartial (the answer holds what
// the broker groups that answered returned) and then sets PartialHeader
// to it, adding to what an earlier call of the same request set.
func partial(w http.ResponseWriter, err error) bool {
	if !errors.Is(err, admin.ErrPartial) {
		return false
	}
	setPartial(w, err.Error())
	return true
}

// setPartial sets PartialHeader to msg (control characters as spaces),
// after what an earlier call of the same request set.
func setPartial(w http.ResponseWriter, msg string) {
	msg = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
	if prev := w.Header().Get(PartialHeader); prev != "" {
		msg = prev + "; " + msg
	}
	w.Header().Set(PartialHeader, msg)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (c *Console) apiSession(w http.ResponseWriter, r *http.Request) {
	if c.auth.open != nil && !allowedHost(r) {
		writeError(w, http.StatusMisdirectedRequest, "the open console answers only to an IP address or localhost")
		return
	}
	s := c.auth.session(r)
	if s == nil {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "log in first", "login": true})
		return
	}
	writeJSON(w, http.StatusOK, c.auth.info(s))
}

func (c *Console) apiCluster(w http.ResponseWriter, r *http.Request, _ *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	out := struct {
		Registries []admin.RegistryState `json:"registries"`
		Brokers    []admin.Member        `json:"brokers"`
		Bridges    []admin.BridgeNode    `json:"bridges"`
		Errors     []string              `json:"errors,omitempty"`
	}{Brokers: []admin.Member{}, Bridges: []admin.BridgeNode{}}
	// The three at once: a registry or broker that does not answer costs
	// the others nothing.
	var wg sync.WaitGroup
	var berr, nerr error
	wg.Add(3)
	go func() { defer wg.Done(); out.Registries = c.adm.Registries(ctx) }()
	go func() {
		defer wg.Done()
		if m, err := c.adm.ClusterMembers(ctx); err != nil {
			berr = err
		} else {
			out.Brokers = m
		}
	}()
	go func() {
		defer wg.Done()
		if b, err := c.adm.Bridges(ctx); err != nil {
			nerr = err
		} else {
			out.Bridges = b
		}
	}()
	wg.Wait()
	if berr != nil {
		out.Errors = append(out.Errors, "brokers: "+berr.Error())
	}
	if nerr != nil {
		out.Errors = append(out.Errors, "bridges: "+nerr.Error())
	}
	writeJSON(w, http.StatusOK, out)
}

type topicRow struct {
	admin.TopicInfo
	TPS float64 `json:"tps"` // messages stored per second (last sample)
}

func (c *Console) apiTopics(w http.ResponseWriter, r *http.Request, _ *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	topics, err := c.adm.TopicConfigs(ctx)
	if err != nil && !partial(w, err) {
		fail(w, err)
		return
	}
	system := r.URL.Query().Get("system") == "1"
	tps := c.sampler.latest("topic:")
	rows := make([]topicRow, 0, len(topics))
	for _, t := range topics {
		if t.System && !system {
			continue
		}
		rows = append(rows, topicRow{TopicInfo: t, TPS: tps[t.Name]})
	}
	writeJSON(w, http.StatusOK, rows)
}

// maxQueues bounds a topic's queue counts.
const maxQueues = admin.MaxTopicQueues

func (c *Console) apiPutTopic(w http.ResponseWriter, r *http.Request, s *session) {
	var req struct {
		Name        string `json:"name"`
		ReadQueues  int32  `json:"readQueues"`
		WriteQueues int32  `json:"writeQueues"`
		Perm        int32  `json:"perm"`
		Order       bool   `json:"order"`
		Cluster     string `json:"cluster"`
	}
	// Left out, the queue counts and perm take the CLI's defaults.
	req.ReadQueues, req.WriteQueues, req.Perm = admin.DefaultTopicQueues, admin.DefaultTopicQueues, admin.DefaultTopicPerm
	if err := decodeBody(r, &req); err != nil {
		fail(w, err)
		return
	}
	if t := r.PathValue("topic"); t != "" {
		if req.Name != "" && req.Name != t {
			fail(w, badf("the body names topic %q, the path %q", req.Name, t))
			return
		}
		req.Name = t
	}
	if err := client.ValidateTopic(req.Name); err != nil {
		fail(w, badRequest{err.Error()})
		return
	}
	if req.Name == client.AutoCreateTopic {
		// The brokers refuse it (SYSTEM_ERROR, as RocketMQ's do): the
		// caller's mistake, not the gateway's.
		fail(w, badf("%s is the brokers' auto-creation template, a reserved name", req.Name))
		return
	}
	if req.ReadQueues < 1 || req.ReadQueues > maxQueues || req.WriteQueues < 1 || req.WriteQueues > maxQueues {
		fail(w, badf("readQueues and writeQueues must be between 1 and %d", maxQueues))
		return
	}
	if req.Perm != 2 && req.Perm != 4 && req.Perm != 6 {
		fail(w, badf("perm must be 6 (read and write), 4 (read only) or 2 (write only), not %d", req.Perm))
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	before, _ := c.adm.QueueStats(ctx, req.Name) // best effort (none for a new topic): only for the warnings
	if err := c.adm.CreateTopic(ctx, req.Cluster, admin.TopicConfig{Name: req.Name, ReadQueues: req.ReadQueues,
		WriteQueues: req.WriteQueues, Perm: req.Perm, Order: req.Order}); err != nil {
		fail(w, err)
		return
	}
	c.log.Info("console: topic created or updated", "topic", req.Name, "user", s.user, "read", req.ReadQueues, "write", req.WriteQueues, "perm", req.Perm)
	resp := map[string]any{"topic": req.Name, "ok": true}
	if warn := admin.HiddenWarnings(req.Name, before, int(req.ReadQueues)); warn != nil {
		resp["warnings"] = warn
	}
	writeJSON(w, http.StatusOK, resp)
}

func (c *Console) apiDeleteTopic(w http.ResponseWriter, r *http.Request, s *session) {
	topic := r.PathValue("topic")
	if err := client.ValidateTopic(topic); err != nil {
		fail(w, badRequest{err.Error()})
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.adm.DeleteTopic(ctx, r.URL.Query().Get("cluster"), topic); err != nil {
		fail(w, err)
		return
	}
	c.log.Info("console: topic deleted", "topic", topic, "user", s.user)
	writeJSON(w, http.StatusOK, map[string]any{"topic": topic, "deleted": true})
}

func (c *Console) apiTopicRoute(w http.ResponseWriter, r *http.Request, _ *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	rd, err := c.adm.TopicRoute(ctx, r.PathValue("topic"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rd)
}

func (c *Console) apiTopicStats(w http.ResponseWriter, r *http.Request, _ *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	st, err := c.adm.QueueStats(ctx, r.PathValue("topic"))
	if err != nil && !partial(w, err) {
		fail(w, err)
		return
	}
	if st == nil {
		st = []admin.QueueStat{} // no broker of the topic answers for it
	}
	writeJSON(w, http.StatusOK, st)
}

type groupRow struct {
	admin.GroupInfo
	Members  int     `json:"members"`
	TotalLag int64   `json:"totalLag"`
	TPS      float64 `json:"tps"`
	Err      string  `json:"error,omitempty"`
}

func (c *Console) apiGroups(w http.ResponseWriter, r *http.Request, _ *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	groups, err := c.adm.Groups(ctx)
	if err != nil && !partial(w, err) {
		fail(w, err)
		return
	}
	system := r.URL.Query().Get("system") == "1"
	tps := c.sampler.latest("group:")
	rows := make([]groupRow, 0, len(groups))
	for _, g := range groups {
		if !g.System || system {
			rows = append(rows, groupRow{GroupInfo: g, TPS: tps[g.Name]})
		}
	}
	// Members and lag: a few calls per group, eight groups at a time.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func(row *groupRow) {
			defer func() { <-sem; wg.Done() }()
			// A part of the cluster that does not answer leaves its
			// members and lag out, and says so.
			m, err := c.adm.GroupMembers(ctx, row.Name)
			row.Members = len(m)
			if err != nil {
				row.Err = err.Error()
			}
			p, err := c.adm.GroupProgress(ctx, row.Name, "")
			for _, q := range p {
				row.TotalLag += q.Lag
			}
			if err != nil && row.Err == "" {
				row.Err = err.Error()
			}
		}(&rows[i])
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, rows)
}

func (c *Console) apiGroup(w http.ResponseWriter, r *http.Request, _ *session) {
	group := r.PathValue("group")
	ctx, cancel := c.ctx(r)
	defer cancel()
	prog, err := c.adm.GroupProgress(ctx, group, r.URL.Query().Get("topic"))
	if err != nil && !partial(w, err) {
		fail(w, err)
		return
	}
	members, err := c.adm.GroupMembers(ctx, group)
	if err != nil && !partial(w, err) {
		fail(w, err)
		return
	}
	var lag int64
	for _, p := range prog {
		lag += p.Lag
	}
	if members == nil {
		members = []admin.GroupMember{}
	}
	if prog == nil {
		prog = []admin.QueueProgress{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "members": members, "queues": prog, "totalLag": lag,
		"tps": c.sampler.latest("group:")[group]})
}

func (c *Console) apiResetOffset(w http.ResponseWriter, r *http.Request, s *session) {
	group := r.PathValue("group")
	var req struct {
		Topic     string `json:"topic"`
		Timestamp int64  `json:"timestamp"` // Unix milliseconds
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, err)
		return
	}
	if err := client.ValidateTopic(req.Topic); err != nil {
		fail(w, badRequest{err.Error()})
		return
	}
	if req.Timestamp <= 0 {
		fail(w, badf("timestamp (Unix milliseconds) is required"))
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	resets, err := c.adm.ResetOffset(ctx, group, req.Topic, time.UnixMilli(req.Timestamp))
	if err != nil {
		fail(w, err)
		return
	}
	c.log.Info("console: offsets reset", "group", group, "topic", req.Topic, "to", time.UnixMilli(req.Timestamp).UTC(), "user", s.user)
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "topic": req.Topic, "resets": resets})
}
