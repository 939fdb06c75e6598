package twin

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
)

// Op is a request's operation. The values are FROZEN: they are the OP
// byte of wire requests and log entries.
type Op uint8

// The operations. Reads (Get*, List*, Query) are answered by Prepare;
// the others become log entries.
const (
	OpGetDevice     Op = 1  // read a device identity
	OpPutDevice     Op = 2  // create or update a device identity (Mode, IfMatch)
	OpDeleteDevice  Op = 3  // delete a device, its modules and twins (IfMatch)
	OpListDevices   Op = 4  // device identities in id order (After, Limit)
	OpGetModule     Op = 5  // read a module identity
	OpPutModule     Op = 6  // create or update a module identity (Mode, IfMatch)
	OpDeleteModule  Op = 7  // delete a module and its twin (IfMatch)
	OpListModules   Op = 8  // a device's module identities
	OpGetTwin       Op = 9  // the full twin document
	OpUpdateTwin    Op = 10 // merge a patch into tags and desired (IfMatch, IfVersion: desired)
	OpReplaceTwin   Op = 11 // replace tags and desired (IfMatch)
	OpGetProperties Op = 12 // device side: {"desired":...,"reported":...}
	OpPatchReported Op = 13 // device side: merge a patch into reported (IfVersion: reported)
	OpSetConnection Op = 14 // a device's connection opened or closed (Connected, ConnID)
	OpQuery         Op = 15 // run the query in Body over this shard (After, Limit)
	OpEnqueueC2D    Op = 16 // note a cloud-to-device message queued for a device (Body: C2DEntry)
	OpAckC2D        Op = 17 // a device acknowledged a cloud-to-device message (Body: C2DEntry)
	opMax           Op = 17
)

var opNames = [...]string{"", "GetDevice", "PutDevice", "DeleteDevice", "ListDevices", "GetModule", "PutModule",
	"DeleteModule", "ListModules", "GetTwin", "UpdateTwin", "ReplaceTwin", "GetProperties", "PatchReported",
	"SetConnection", "Query", "EnqueueC2D", "AckC2D"}

func (o Op) String() string {
	if o >= 1 && o <= opMax {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Logged reports whether the operation is a write: it goes through the log.
func (o Op) Logged() bool {
	switch o {
	case OpPutDevice, OpDeleteDevice, OpPutModule, OpDeleteModule, OpUpdateTwin, OpReplaceTwin, OpPatchReported, OpSetConnection,
		OpEnqueueC2D, OpAckC2D:
		return true
	}
	return false
}

// PutMode says what a PutDevice or PutModule may do (FROZEN values).
type PutMode uint8

const (
	PutUpsert PutMode = 0 // create, or update when it exists (IfMatch applies then)
	PutCreate PutMode = 1 // create only: 409 when it exists
	PutUpdate PutMode = 2 // update only: 404 when it does not exist
)

// Request is one twin operation as a front end or client sends it.
type Request struct {
	Op       Op
	DeviceID string
	ModuleID string // "" addresses the device (its identity or twin)
	// IfMatch conditions a write on the current etag: the twin's for
	// twin writes, the identity's for identity writes. "" means no
	// condition, "*" that it must exist; quotes around the value (HTTP's
	// If-Match form) are ignored.
	IfMatch string
	// IfVersion, when not 0, conditions UpdateTwin on the desired
	// $version and PatchReported on the reported $version.
	IfVersion int64
	Mode      PutMode // PutDevice, PutModule
	Connected bool    // SetConnection: opened (true) or closed
	ConnID    string  // SetConnection: the connection's id; a close applies only to the current one
	// Body is the JSON of the operation: a Device or Module (Put*), a
	// twin patch or document (UpdateTwin, ReplaceTwin: tags and
	// properties.desired are read), a reported patch (PatchReported), or
	// the query text (Query). For a SetConnection that opens a
	// connection it is the IoT Plug and Play model id the device
	// announced (CheckModelID), or empty when it announced none: the twin's
	// modelId keeps the last one announced.
	Body []byte
	// After and Limit page List* and Query: the items after the key After
	// (a Reply.Next), at most Limit (0: MaxPageSize).
	After string
	Limit int
}

// Reply is the answer to a Request.
type Reply struct {
	Status  int
	Err     *Error // nil on success
	Etag    string // twin writes and reads: the twin etag; identity ones: the identity etag
	Version int64  // twin version; PatchReported: the new reported $version; UpdateTwin: the desired $version
	Body    []byte // JSON: identity, twin, properties, or a page (a JSON array)
	Next    string // paging: continue after this key ("" = no more)
}

func errReply(err *Error) Reply { return Reply{Status: err.Status, Err: err} }

// Outcome is what an applied entry produced: the reply for the requester,
// the change events for the events topic, and the desired changes for the
// devices watching them.
type Outcome struct {
	Reply   Reply
	Events  []Event
	Desired []DesiredChange
}

// Event is one change for back-end applications (the broker produces it
// to the twin events topic).
type Event struct {
	OpType   string // OpType* constants
	DeviceID string
	ModuleID string
	Version  int64  // the twin version after the change
	Etag     string // the twin etag after the change
	Time     int64  // Unix ms: the store time of the entry
	Body     []byte // JSON (see doc.go)
}

// Event operation types, IoT Hub's names.
const (
	OpTypeUpdateTwin         = "updateTwin"
	OpTypeReplaceTwin        = "replaceTwin"
	OpTypeConnected          = "deviceConnected"
	OpTypeDisconnected       = "deviceDisconnected"
	OpTypeCreateIdentity     = "createDeviceIdentity"
	OpTypeDeleteIdentity     = "deleteDeviceIdentity"
	OpTypeCreateModule       = "createModuleIdentity"
	OpTypeDeleteModule       = "deleteModuleIdentity"
	messageSchemaTwin        = "twinChangeNotification"
	messageSchemaConnection  = "deviceConnectionStateNotification"
	messageSchemaLifecycle   = "deviceLifecycleNotification"
	messageSchemaModuleCycle = "moduleLifecycleNotification"
)

// MessageSchema returns the iothub-message-schema value of an event's
// operation type.
func MessageSchema(opType string) string {
	switch opType {
	case OpTypeUpdateTwin, OpTypeReplaceTwin:
		return messageSchemaTwin
	case OpTypeConnected, OpTypeDisconnected:
		return messageSchemaConnection
	case OpTypeCreateModule, OpTypeDeleteModule:
		return messageSchemaModuleCycle
	}
	return messageSchemaLifecycle
}

// DesiredChange is a change of a twin's desired properties, for the device
// (or module) if it is connected: Patch is the JSON a device receives on
// $iothub/twin/PATCH/properties/desired/?$version=Version (members set to
// null were removed; "$version" included).
type DesiredChange struct {
	DeviceID string
	ModuleID string
	Version  int64
	Patch    []byte
}

// RevokedVersion is the Version of a DesiredChange that is no desired
// change but tells the watchers that the identity was deleted or
// disabled (no Patch): a front end drops the identity's connection.
const RevokedVersion = 0

// Revoked reports whether d tells of a deleted or disabled identity.
func (d *DesiredChange) Revoked() bool { return d.Version == RevokedVersion }

// Key returns the twin key of the change: deviceId or deviceId/moduleId.
func (d *DesiredChange) Key() string { return TwinKey(d.DeviceID, d.ModuleID) }

// TwinKey returns the key of a twin: deviceId, or deviceId/moduleId.
func TwinKey(deviceID, moduleID string) string {
	if moduleID == "" {
		return deviceID
	}
	return deviceID + "/" + moduleID
}

// record is one identity with its twin.
type record struct {
	key         string // TwinKey
	deviceID    string
	moduleID    string
	id          identity
	tags        node // object, no metadata
	desired     node // object, with metadata
	reported    node // object, with metadata
	version     int64
	desiredVer  int64
	reportedVer int64
	modules     int // a device's module count
	// c2d is a device's outstanding cloud-to-device messages (c2d.go).
	c2d []c2dItem
}

func (r *record) isModule() bool { return r.moduleID != "" }

// Engine holds the identities and twins of one shard: a deterministic
// state machine fed by a log (see the package documentation). Its methods
// are safe for concurrent use; reads share a lock, Apply takes it alone.
type Engine struct {
	opts Options
	log  *slog.Logger
	rand io.Reader

	mu   sync.RWMutex
	recs map[string]*record // protected by mu: by TwinKey
	devs keyset             // protected by mu: device keys in order
	mods keyset             // protected by mu: module keys in order
	idx  index              // protected by mu
}

// New returns an empty engine. A nil logger discards.
func New(opts Options, log *slog.Logger) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{opts: opts, log: log, rand: opts.Rand, recs: map[string]*record{}}
	if e.rand == nil {
		e.rand = rand.Reader
	}
	e.idx.init(opts.IndexPaths)
	return e, nil
}

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Prepare checks a request and decides how it is served:
//
//   - needsLog false: reply is the answer (errors, reads, queries).
//   - needsLog true: a write. entry is a self-contained log entry (the
//     JSON parsed and checked, generated keys and ids in it); the caller
//     appends it to the log and passes it to Apply, whose Outcome holds
//     the reply. Conditions that depend on the state (existence, etags,
//     versions, sizes after a merge, the module quota) are decided by
//     Apply, so several entries may be in flight.
//
// Prepare changes nothing.
func (e *Engine) Prepare(req *Request) (entry []byte, reply Reply, needsLog bool) {
	if req.Op == 0 || req.Op > opMax {
		return nil, errReply(invalidf("unknown operation %d", req.Op)), false
	}
	if len(req.Body) > MaxBodyBytes {
		return nil, errReply(errf(StatusTooLarge, CodeTooLarge, "body: %d bytes (at most %d)", len(req.Body), MaxBodyBytes)), false
	}
	if err := checkAddress(req); err != nil {
		return nil, errReply(err), false
	}
	if req.Op == OpQuery {
		return nil, e.query(req), false
	}
	if !req.Op.Logged() {
		e.mu.RLock()
		defer e.mu.RUnlock()
		return nil, e.readLocked(req), false
	}
	le, err := e.prepareEntry(req)
	if err != nil {
		return nil, errReply(err), false
	}
	if req.Op == OpAckC2D && !e.c2dPending(req) {
		return nil, Reply{Status: StatusOK}, false
	}
	return le.encode(), Reply{}, true
}

// checkAddress checks the ids an operation needs.
func checkAddress(req *Request) *Error {
	switch req.Op {
	case OpListDevices, OpQuery:
		return nil
	}
	if err := CheckID(req.DeviceID, "deviceId"); err != nil {
		return AsError(err)
	}
	switch req.Op {
	case OpGetModule, OpPutModule, OpDeleteModule:
		if req.ModuleID == "" {
			return invalidf("moduleId: empty")
		}
	case OpGetDevice, OpPutDevice, OpDeleteDevice, OpListModules, OpEnqueueC2D, OpAckC2D:
		if req.ModuleID != "" {
			return invalidf("moduleId: %s takes none", req.Op)
		}
	}
	if req.ModuleID != "" {
		if err := CheckID(req.ModuleID, "moduleId"); err != nil {
			return AsError(err)
		}
	}
	return nil
}

// prepareEntry parses and checks a write's body into its log entry.
func (e *Engine) prepareEntry(req *Request) (*logEntry, *Error) {
	le := &logEntry{op: req.Op, deviceID: req.DeviceID, moduleID: req.ModuleID, ifMatch: normalizeEtag(req.IfMatch), ifVersion: req.IfVersion}
	if req.IfVersion < 0 {
		return nil, invalidf("ifVersion: %d is negative", req.IfVersion)
	}
	switch req.Op {
	case OpPutDevice, OpPutModule:
		if req.Mode > PutUpdate {
			return nil, invalidf("put mode %d", req.Mode)
		}
		le.mode = req.Mode
		var err *Error
		if req.Op == OpPutDevice {
			le.in, err = parseDeviceBody(req.Body, req.DeviceID)
		} else {
			le.in, err = parseModuleBody(req.Body, req.DeviceID, req.ModuleID)
		}
		if err != nil {
			return nil, err
		}
		if le.genPrimary, le.genSecondary, le.generationID, err = e.generate(); err != nil {
			return nil, err
		}
	case OpUpdateTwin, OpReplaceTwin:
		doc, err := parseDoc(req.Body)
		if err != nil {
			return nil, err
		}
		if doc.kind != KindObject {
			return nil, invalidf("the twin document must be a JSON object")
		}
		if t := doc.get("tags"); t != nil {
			if le.tags, err = sectionRoot(t, SectionTags); err != nil {
				return nil, err
			}
			le.hasTags = true
		}
		if p := doc.get("properties"); p != nil && p.kind != KindNull {
			if p.kind != KindObject {
				return nil, invalidf("properties must be a JSON object")
			}
			if d := p.get("desired"); d != nil {
				if le.desired, err = sectionRoot(d, SectionDesired); err != nil {
					return nil, err
				}
				le.hasDesired = true
			}
		}
	case OpPatchReported:
		doc, err := parseDoc(req.Body)
		if err != nil {
			return nil, err
		}
		if doc.kind != KindObject {
			return nil, invalidf("properties.reported must be a JSON object")
		}
		if le.reported, err = sectionRoot(&doc, SectionReported); err != nil {
			return nil, err
		}
	case OpSetConnection:
		if len(req.ConnID) > 256 {
			return nil, invalidf("connection id: %d bytes (at most 256)", len(req.ConnID))
		}
		le.connected, le.connID = req.Connected, req.ConnID
		if len(req.Body) > 0 {
			if !req.Connected {
				return nil, invalidf("a model id is announced when a connection opens, not when it closes")
			}
			if err := CheckModelID(string(req.Body)); err != nil {
				return nil, AsError(err)
			}
			le.modelID = string(req.Body)
		}
	case OpEnqueueC2D, OpAckC2D:
		if err := prepareC2D(req, le); err != nil {
			return nil, err
		}
	}
	return le, nil
}

// parseDoc parses a request's JSON body.
func parseDoc(body []byte) (node, *Error) {
	doc, err := parseJSON(body)
	if err != nil {
		return node{}, AsError(err)
	}
	return doc, nil
}

// generate draws the fallback SAS keys (32 random bytes each, base64) and
// a generation id (18 decimal digits) a Put entry carries.
func (e *Engine) generate() (primary, secondary, gen string, err *Error) {
	var b [72]byte
	if _, rerr := io.ReadFull(e.rand, b[:]); rerr != nil {
		return "", "", "", errf(500, "InternalError", "random source: %v", rerr)
	}
	primary = base64.StdEncoding.EncodeToString(b[:32])
	secondary = base64.StdEncoding.EncodeToString(b[32:64])
	gen = fmt.Sprintf("%018d", binary.BigEndian.Uint64(b[64:])%1_000_000_000_000_000_000)
	return primary, secondary, gen, nil
}

// readLocked serves a read. Called with mu held for reading.
func (e *Engine) readLocked(req *Request) Reply {
	switch req.Op {
	case OpListDevices:
		return e.listLocked(&e.devs, req.After, req.Limit, func(dst []byte, r *record) []byte { return appendDeviceJSON(dst, r) })
	case OpListModules:
		if e.recs[req.DeviceID] == nil {
			return errReply(errf(StatusNotFound, CodeDeviceNotFound, "device %q not found", req.DeviceID))
		}
		body := []byte{'['}
		e.mods.from(req.DeviceID+"/", func(k string) bool {
			r := e.recs[k]
			if r.deviceID != req.DeviceID {
				return false
			}
			if len(body) > 1 {
				body = append(body, ',')
			}
			body = appendModuleJSON(body, r)
			return true
		})
		return Reply{Status: StatusOK, Body: append(body, ']')}
	}
	r, err := e.lookupLocked(req.DeviceID, req.ModuleID)
	if err != nil {
		return errReply(err)
	}
	switch req.Op {
	case OpGetDevice:
		return Reply{Status: StatusOK, Etag: identityEtag(r.id.etagVer), Body: appendDeviceJSON(nil, r)}
	case OpGetModule:
		return Reply{Status: StatusOK, Etag: identityEtag(r.id.etagVer), Body: appendModuleJSON(nil, r)}
	case OpGetTwin:
		return Reply{Status: StatusOK, Etag: Etag(r.version), Version: r.version, Body: appendTwinJSON(nil, r)}
	default: // OpGetProperties
		return Reply{Status: StatusOK, Etag: Etag(r.version), Version: r.version, Body: appendPropertiesJSON(nil, r)}
	}
}

func (e *Engine) lookupLocked(deviceID, moduleID string) (*record, *Error) {
	if r := e.recs[TwinKey(deviceID, moduleID)]; r != nil {
		return r, nil
	}
	if moduleID == "" {
		return nil, errf(StatusNotFound, CodeDeviceNotFound, "device %q not found", deviceID)
	}
	if e.recs[deviceID] == nil {
		return nil, errf(StatusNotFound, CodeDeviceNotFound, "device %q not found", deviceID)
	}
	return nil, errf(StatusNotFound, CodeModuleNotFound, "module %q not found on device %q", moduleID, deviceID)
}

// listLocked pages a keyset: the JSON array of at most limit items after
// the key after.
func (e *Engine) listLocked(ks *keyset, after string, limit int, render func([]byte, *record) []byte) Reply {
	limit = e.pageLimit(limit)
	body := []byte{'['}
	n, last, more := 0, "", false
	ks.ascend(after, func(k string) bool {
		if n == limit {
			more = true
			return false
		}
		if n > 0 {
			body = append(body, ',')
		}
		body = render(body, e.recs[k])
		n++
		last = k
		return true
	})
	rep := Reply{Status: StatusOK, Body: append(body, ']')}
	if more {
		rep.Next = last
	}
	return rep
}

func (e *Engine) pageLimit(limit int) int {
	if limit <= 0 || limit > e.opts.MaxPageSize {
		return e.opts.MaxPageSize
	}
	return limit
}

// Get returns the full twin document of deviceID[/moduleID] (without a
// request; for inspection and tests).
func (e *Engine) Get(deviceID, moduleID string) ([]byte, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r := e.recs[TwinKey(deviceID, moduleID)]
	if r == nil {
		return nil, false
	}
	return appendTwinJSON(nil, r), true
}

// Stats is a point-in-time summary of an engine.
type Stats struct {
	Devices      int
	Modules      int
	Connected    int
	IndexEntries int // postings held by the query index
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.RLock()
	defer e.mu.RUnlock()
	st := Stats{Devices: e.devs.len(), Modules: e.mods.len(), IndexEntries: e.idx.entries}
	for _, r := range e.recs {
		if r.id.connected {
			st.Connected++
		}
	}
	return st
}
