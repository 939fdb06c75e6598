package twin

import (
	"strconv"
	"time"
)

// Apply applies a log entry that Prepare produced (here or on another
// replica). storeTime is the store time of the log record holding it: the
// only clock Apply reads ($lastUpdated, lastActivityTime, ...). Applying
// the same entries with the same store times to equal engines yields
// equal engines. A malformed entry returns an error wrapping ErrCorrupt
// (or ErrUnsupportedFormat) and changes nothing; a request that fails a
// condition is an Outcome whose Reply carries the error, and changes
// nothing either.
func (e *Engine) Apply(entry []byte, storeTime time.Time) (Outcome, error) {
	le, err := decodeEntry(entry)
	if err != nil {
		return Outcome{}, err
	}
	now := storeTime.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out Outcome
	switch le.op {
	case OpPutDevice, OpPutModule:
		e.putIdentityLocked(le, now, &out)
	case OpDeleteDevice, OpDeleteModule:
		e.deleteLocked(le, now, &out)
	case OpUpdateTwin, OpReplaceTwin:
		e.writeTwinLocked(le, now, &out)
	case OpPatchReported:
		e.patchReportedLocked(le, now, &out)
	case OpSetConnection:
		e.setConnectionLocked(le, now, &out)
	case OpEnqueueC2D, OpAckC2D:
		e.c2dLocked(le, now, &out)
	}
	return out, nil
}

func (e *Engine) putIdentityLocked(le *logEntry, now int64, out *Outcome) {
	key := TwinKey(le.deviceID, le.moduleID)
	r := e.recs[key]
	var dev *record
	if le.moduleID != "" {
		if dev = e.recs[le.deviceID]; dev == nil {
			out.Reply = errReply(errf(StatusNotFound, CodeDeviceNotFound, "device %q not found", le.deviceID))
			return
		}
	}
	if r == nil {
		switch {
		case le.mode == PutUpdate || le.ifMatch != "":
			_, err := e.lookupLocked(le.deviceID, le.moduleID)
			out.Reply = errReply(err)
			return
		case dev != nil && dev.modules >= e.opts.MaxModulesPerDevice:
			out.Reply = errReply(errf(StatusForbidden, CodeTooManyModules, "module quota: device %q has %d modules (at most %d)",
				le.deviceID, dev.modules, e.opts.MaxModulesPerDevice))
			return
		}
		r = &record{key: key, deviceID: le.deviceID, moduleID: le.moduleID, version: 1, desiredVer: 1, reportedVer: 1}
		r.tags = node{kind: KindObject}
		r.desired = node{kind: KindObject, upd: now, ver: 1}
		r.reported = node{kind: KindObject, upd: now}
		r.id = identity{etagVer: 1, generationID: le.generationID, statusUpdated: now}
		setIdentity(&r.id, le, nil, now)
		e.recs[key] = r
		if dev != nil {
			dev.modules++
			e.mods.insert(key)
		} else {
			e.devs.insert(key)
		}
		e.idx.add(r, idxAll)
		opType := OpTypeCreateIdentity
		if dev != nil {
			opType = OpTypeCreateModule
		}
		e.event(out, r, opType, now, appendTwinJSON(nil, r))
		out.Reply = identityReply(r)
		return
	}
	if le.mode == PutCreate {
		code, what := CodeDeviceExists, "device "+strconv.Quote(le.deviceID)
		if le.moduleID != "" {
			code, what = CodeModuleExists, "module "+strconv.Quote(le.moduleID)+" on device "+strconv.Quote(le.deviceID)
		}
		out.Reply = errReply(errf(StatusConflict, code, "%s already exists", what))
		return
	}
	if et := identityEtag(r.id.etagVer); !etagMatches(le.ifMatch, et) {
		out.Reply = errReply(errf(StatusPrecondition, CodePreconditionFailed, "etag: If-Match %q does not match the identity's %q", le.ifMatch, et))
		return
	}
	e.idx.remove(r, idxRoot)
	prev := r.id
	setIdentity(&r.id, le, &prev, now)
	r.id.etagVer++
	e.idx.add(r, idxRoot)
	if r.id.status == statusDisabled && prev.status != statusDisabled {
		// A disabled device's modules lose their connections too (IoT
		// Hub refuses them while the device is disabled).
		if !r.isModule() {
			for _, k := range e.modulesOfLocked(r.deviceID) {
				out.Desired = append(out.Desired, revoked(e.recs[k]))
			}
		}
		out.Desired = append(out.Desired, revoked(r))
	}
	out.Reply = identityReply(r)
}

// modulesOfLocked returns the keys of a device's modules, in key order.
func (e *Engine) modulesOfLocked(deviceID string) []string {
	var mods []string
	e.mods.from(deviceID+"/", func(k string) bool {
		if e.recs[k].deviceID != deviceID {
			return false
		}
		mods = append(mods, k)
		return true
	})
	return mods
}

// setIdentity writes the mutable identity fields of a Put. prev is the
// identity before an update (nil on create): SAS keys a request leaves
// empty are kept from it when it had them, else the entry's generated
// ones are used.
func setIdentity(id *identity, le *logEntry, prev *identity, now int64) {
	in := &le.in
	if prev != nil && prev.status != in.status {
		id.statusUpdated = now
	}
	id.status, id.statusReason, id.auth = in.status, in.statusReason, in.auth
	id.iotEdge, id.managedBy = in.iotEdge, in.managedBy
	id.primaryThumb, id.secondThumb = in.primaryThumb, in.secondThumb
	id.primaryKey, id.secondaryKey = "", ""
	if in.auth != authSAS {
		return
	}
	id.primaryKey, id.secondaryKey = in.primaryKey, in.secondaryKey
	if id.primaryKey == "" {
		id.primaryKey = le.genPrimary
		if prev != nil && prev.primaryKey != "" {
			id.primaryKey = prev.primaryKey
		}
	}
	if id.secondaryKey == "" {
		id.secondaryKey = le.genSecondary
		if prev != nil && prev.secondaryKey != "" {
			id.secondaryKey = prev.secondaryKey
		}
	}
}

func identityReply(r *record) Reply {
	rep := Reply{Status: StatusOK, Etag: identityEtag(r.id.etagVer)}
	if r.isModule() {
		rep.Body = appendModuleJSON(nil, r)
	} else {
		rep.Body = appendDeviceJSON(nil, r)
	}
	return rep
}

func (e *Engine) deleteLocked(le *logEntry, now int64, out *Outcome) {
	r, err := e.lookupLocked(le.deviceID, le.moduleID)
	if err != nil {
		out.Reply = errReply(err)
		return
	}
	if et := identityEtag(r.id.etagVer); !etagMatches(le.ifMatch, et) {
		out.Reply = errReply(errf(StatusPrecondition, CodePreconditionFailed, "etag: If-Match %q does not match the identity's %q", le.ifMatch, et))
		return
	}
	if !r.isModule() {
		for _, k := range e.modulesOfLocked(r.deviceID) {
			e.removeLocked(e.recs[k], now, out)
		}
	}
	e.removeLocked(r, now, out)
	out.Reply = Reply{Status: StatusNoContent}
}

func (e *Engine) removeLocked(r *record, now int64, out *Outcome) {
	e.idx.remove(r, idxAll)
	delete(e.recs, r.key)
	opType := OpTypeDeleteIdentity
	if r.isModule() {
		e.mods.delete(r.key)
		if dev := e.recs[r.deviceID]; dev != nil {
			dev.modules--
		}
		opType = OpTypeDeleteModule
	} else {
		e.devs.delete(r.key)
	}
	e.event(out, r, opType, now, appendTwinJSON(nil, r))
	out.Desired = append(out.Desired, revoked(r))
}

// revoked is the notification that r's identity was deleted or disabled:
// the front end holding its connection drops it.
func revoked(r *record) DesiredChange {
	return DesiredChange{DeviceID: r.deviceID, ModuleID: r.moduleID, Version: RevokedVersion}
}

// writeTwinLocked serves UpdateTwin (merge) and ReplaceTwin.
func (e *Engine) writeTwinLocked(le *logEntry, now int64, out *Outcome) {
	r, err := e.lookupLocked(le.deviceID, le.moduleID)
	if err != nil {
		out.Reply = errReply(err)
		return
	}
	if et := Etag(r.version); !etagMatches(le.ifMatch, et) {
		out.Reply = errReply(errf(StatusPrecondition, CodePreconditionFailed, "etag: If-Match %q does not match the twin's %q", le.ifMatch, et))
		return
	}
	if le.op == OpUpdateTwin && le.ifVersion != 0 && le.ifVersion != r.desiredVer {
		out.Reply = errReply(errf(StatusPrecondition, CodePreconditionFailed, "version: expected desired $version %d, it is %d", le.ifVersion, r.desiredVer))
		return
	}
	replace := le.op == OpReplaceTwin
	hasTags, hasDesired := le.hasTags || replace, le.hasDesired || replace
	if !hasTags && !hasDesired {
		// Nothing a back end may write (only properties.reported or
		// read-only parts, which are ignored): the twin stays as it is,
		// its version and etag too.
		out.Reply = Reply{Status: StatusOK, Etag: Etag(r.version), Version: r.version, Body: appendTwinJSON(nil, r)}
		return
	}
	dv := r.desiredVer
	if hasDesired {
		dv++
	}
	st := stamp{upd: now, ver: dv}
	var tags, desired node
	if hasTags {
		tags = sectionAfter(&r.tags, &le.tags, replace, stamp{})
		if err := checkSize(&tags, SectionTags); err != nil {
			out.Reply = errReply(err)
			return
		}
	}
	if hasDesired {
		desired = sectionAfter(&r.desired, &le.desired, replace, st)
		if err := checkSize(&desired, SectionDesired); err != nil {
			out.Reply = errReply(err)
			return
		}
	}
	var patch node
	if hasDesired {
		if replace || le.desired.kind == KindNull {
			patch = diffPatch(&r.desired, &desired)
		} else {
			patch = le.desired
		}
	}
	mask := indexMask(0)
	if hasTags {
		mask |= idxTags
	}
	if hasDesired {
		mask |= idxDesired
	}
	e.idx.remove(r, mask)
	if hasTags {
		r.tags = tags
	}
	if hasDesired {
		r.desired = desired
		r.desiredVer = dv
	}
	r.version++
	e.idx.add(r, mask)

	opType := OpTypeUpdateTwin
	if replace {
		opType = OpTypeReplaceTwin
	}
	body := []byte(`{"version":`)
	body = strconv.AppendInt(body, r.version, 10)
	if hasTags {
		body = append(body, `,"tags":`...)
		if replace || le.tags.kind == KindNull {
			body = appendValue(body, &r.tags)
		} else {
			body = appendValue(body, &le.tags)
		}
	}
	if hasDesired {
		body = append(body, `,"properties":{"desired":`...)
		if replace {
			body = appendSection(body, &r.desired, metaDesired, false, dv)
		} else {
			body = appendSection(body, &patch, metaDesired, false, dv)
		}
		body = append(body, '}')
	}
	e.event(out, r, opType, now, append(body, '}'))
	if hasDesired {
		out.Desired = append(out.Desired, DesiredChange{DeviceID: r.deviceID, ModuleID: r.moduleID, Version: dv,
			Patch: appendSection(nil, &patch, metaDesired, false, dv)})
	}
	out.Reply = Reply{Status: StatusOK, Etag: Etag(r.version), Version: r.version, Body: appendTwinJSON(nil, r)}
}

// sectionAfter returns a section as a write leaves it, without touching
// cur: replaced by v (a null v clears it), or v merged into a copy.
func sectionAfter(cur, v *node, replace bool, st stamp) node {
	if replace || v.kind == KindNull {
		if v.kind == KindNull {
			return node{kind: KindObject, upd: st.upd, ver: st.ver}
		}
		return materialize(v, st)
	}
	next := cur.clone()
	mergePatch(&next, v, st)
	tighten(&next)
	return next
}

func (e *Engine) patchReportedLocked(le *logEntry, now int64, out *Outcome) {
	r, err := e.lookupLocked(le.deviceID, le.moduleID)
	if err != nil {
		out.Reply = errReply(err)
		return
	}
	if le.ifVersion != 0 && le.ifVersion != r.reportedVer {
		out.Reply = errReply(errf(StatusPrecondition, CodePreconditionFailed, "version: expected reported $version %d, it is %d", le.ifVersion, r.reportedVer))
		return
	}
	reported := sectionAfter(&r.reported, &le.reported, false, stamp{upd: now})
	if err := checkSize(&reported, SectionReported); err != nil {
		out.Reply = errReply(err)
		return
	}
	e.idx.remove(r, idxReported)
	r.reported = reported
	r.reportedVer++
	r.version++
	r.id.lastActivity = now
	e.idx.add(r, idxReported)
	body := []byte(`{"version":`)
	body = strconv.AppendInt(body, r.version, 10)
	body = append(body, `,"properties":{"reported":`...)
	body = appendSection(body, &le.reported, metaReported, false, r.reportedVer)
	e.event(out, r, OpTypeUpdateTwin, now, append(body, "}}"...))
	out.Reply = Reply{Status: StatusNoContent, Etag: Etag(r.version), Version: r.reportedVer}
}

func (e *Engine) setConnectionLocked(le *logEntry, now int64, out *Outcome) {
	r, err := e.lookupLocked(le.deviceID, le.moduleID)
	if err != nil {
		out.Reply = errReply(err)
		return
	}
	if !le.connected && le.connID != "" && r.id.connID != le.connID {
		out.Reply = errReply(errf(StatusPrecondition, CodeConnectionSuperseded,
			"connection %q is not the current connection of %q", le.connID, r.key))
		return
	}
	if !le.connected && !r.id.connected {
		out.Reply = Reply{Status: StatusOK, Etag: Etag(r.version), Version: r.version}
		return // closing what was already closed: no change
	}
	e.idx.remove(r, idxRoot)
	r.id.connected = le.connected
	r.id.connID = le.connID
	if le.modelID != "" {
		r.id.modelID = le.modelID
	}
	if !le.connected {
		r.id.connID = ""
	}
	r.id.connUpdated = now
	r.id.lastActivity = now
	e.idx.add(r, idxRoot)
	out.Reply = Reply{Status: StatusOK, Etag: Etag(r.version), Version: r.version}
	opType, state := OpTypeDisconnected, StateDisconnected
	if le.connected {
		opType, state = OpTypeConnected, StateConnected
	}
	body := []byte(`{"deviceId":`)
	body = appendString(body, r.deviceID)
	if r.isModule() {
		body = append(body, `,"moduleId":`...)
		body = appendString(body, r.moduleID)
	}
	body = append(body, `,"connectionState":`...)
	body = appendString(body, state)
	body = append(body, `,"connectionStateUpdatedTime":`...)
	body = appendTime(body, now)
	e.event(out, r, opType, now, append(body, '}'))
}

func (e *Engine) event(out *Outcome, r *record, opType string, now int64, body []byte) {
	out.Events = append(out.Events, Event{OpType: opType, DeviceID: r.deviceID, ModuleID: r.moduleID,
		Version: r.version, Etag: Etag(r.version), Time: now, Body: body})
}
