// The timeline of one task (continuum inspect --html, continuum dev): plain DOM, no framework.
// The data is the JSON block #timeline-data (continuum/timeline/model.py says what it holds);
// everything is built with textContent, never innerHTML, so no value can become markup.
"use strict";

const DATA = JSON.parse(document.getElementById("timeline-data").textContent);
const T = DATA.timeline;
const ICONS = {
  suspended: "‖", waiting: "◷", succeeded: "✓", failed: "✗", cancelled: "⊘",
  crashed: "⚡", running: "●",
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function duration(s) {
  if (s === null || s === undefined) return "?";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60), h = Math.floor(s / 3600), d = Math.floor(s / 86400);
  if (s < 3600) return `${m} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${h} h ${Math.floor((s % 3600) / 60)} min`;
  return `${d} d ${Math.floor((s % 86400) / 3600)} h`;
}

function when(iso) {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` : "—";
}

function json(value) {
  return el("pre", { class: "json" }, JSON.stringify(value, null, 2) ?? "null");
}

function pct(part, whole) {
  return `${Math.max(0, Math.min(100, (100 * part) / whole))}%`;
}

function dollars(x) {
  // Three significant digits, as `continuum cost` prints them (continuum.prices.money).
  if (x === 0) return "$0";
  if (Math.abs(x) >= 1) return `$${x.toFixed(2)}`;
  return `$${x.toFixed(Math.max(2, 2 - Math.floor(Math.log10(Math.abs(x)))))}`;
}

function waiterText(w) {
  const until = w.deadline ? ` until ${when(w.deadline)}` : "";
  return `${w.kind === "time" ? "sleep" : w.kind} '${w.name}'${until}`;
}

// -- the header: status, what it waits for, the error, the cost -------------------------------

function header() {
  const task = T.task, sum = T.summary;
  const facts = [
    `${plural(sum.invocations, "invocation")} over ${duration(sum.span_s)}`,
    `${duration(sum.compute_s)} of compute`,
    sum.suspensions && `${sum.suspensions} suspended`,
    sum.crashes && `${sum.crashes} crashed`,
    sum.waited_s && `${duration(sum.waited_s)} waiting`,
    sum.hops && `${sum.hops} timer hops`,
    dollars(task.cost.total),
  ].filter(Boolean);
  return el("header", { id: "task" },
    DATA.server && el("a", { class: "back", href: DATA.server.list }, "← all tasks"),
    el("h1", {}, task.task_id, " ", el("span", { class: "name" }, task.task_name)),
    el("span", { class: `status status-${task.status}`, id: "status" }, task.status),
    el("span", { class: "turn" }, `turn ${task.turn} · generation ${task.generation}`),
    el("p", { class: "facts" }, facts.join(" · ")),
    el("p", { class: "times" },
      `created ${when(task.created_at)} · updated ${when(task.updated_at)}`,
      task.finished_at ? ` · finished ${when(task.finished_at)}` : ""),
    task.parent && el("p", { class: "family", id: "parent" }, "child of ", taskLink(task.parent.task_id),
      ` · item ${task.parent.index} of batch ${task.parent.batch}`),
  );
}

function taskLink(id) {
  // On the dev server a task's id links to its page; a file of its own has nowhere to go.
  return DATA.server ? el("a", { href: `${DATA.server.list}tasks/${encodeURIComponent(id)}` }, id)
    : el("code", {}, id);
}

function childrenBox() {
  const kids = T.task.children;
  if (!kids.length) return null;
  const rows = kids.map((c) => [c.index, taskLink(c.task_id), c.task_name,
    el("span", { class: `status status-${c.status || "pending"}` }, c.status || "not started"),
    c.cost === null ? "" : dollars(c.cost)]);
  const spent = kids.reduce((sum, c) => sum + (c.cost || 0), 0);
  return el("section", { id: "children", class: "box" },
    el("h2", {}, `Child tasks (${kids.length})`, " ", el("small", {}, `${dollars(spent)} more`)),
    table(["#", "task id", "task", "status", "cost"], rows, "children"));
}

function agentBox() {
  // An agent task: what the model asked, what each tool got and gave, what a person approved.
  const events = T.task.agent || [];
  if (!events.length) return null;
  const text = (v) => (typeof v === "string" ? v : JSON.stringify(v));
  const rows = events.map((e) => e.kind === "model_request"
    ? [`model ${e.model || ""}`, e.tool_calls.map((c) => `${c.tool}(${text(c.args)})`).join("\n"),
      e.error || e.text || ""]
    : e.kind === "tool_call" ? [`tool ${e.tool}`, text(e.args), e.error || text(e.result)]
      : [`approval ${e.tool}`, text(e.args), e.comment ? `${e.decision}: ${e.comment}` : e.decision]);
  return el("section", { id: "agent", class: "box" },
    el("h2", {}, `Agent (${events.length})`, " ", el("small", {}, `turn ${T.task.turn}`)),
    table(["", "asked", "answer"], rows, "agent"));
}

function notice() {
  const n = DATA.notice;
  return n && el("p", { class: `notice notice-${n.kind}`, id: "notice", role: "status" }, n.text);
}

function errorBox() {
  const e = T.task.error;
  if (!e) return null;
  const where = [e.step && `at step ${e.step}`, e.turn !== null && `in turn ${e.turn}`];
  if (T.task.status === "cancelled") {
    // A cancel is what someone asked for, not a failure: its reason, in the cancel colour.
    return el("section", { id: "error", class: "box box-cancelled" },
      el("h2", {}, "Cancelled", " ", el("small", {}, where.filter(Boolean).join(" "))),
      el("p", { class: "message" }, e.message));
  }
  return el("section", { id: "error", class: "box box-error" },
    el("h2", {}, `Failed: ${e.type}`, " ", el("small", {}, where.filter(Boolean).join(" "))),
    el("p", { class: "message" }, e.message),
    e.traceback && el("details", { class: "traceback" }, el("summary", {}, "Where it raised"),
      el("pre", { class: "json" }, e.traceback)));
}

function resultBox() {
  const task = T.task;
  return task.status === "succeeded" &&
    el("section", { id: "result", class: "box box-ok" }, el("h2", {}, "Result"), json(task.result));
}

function form(action, label, fields, cls) {
  return el("form", { method: "post", action: `${DATA.server.base}/${action}`, class: cls },
    el("input", { type: "hidden", name: "token", value: DATA.server.token }),
    ...fields, el("button", { type: "submit" }, label));
}

function field(label, input) {
  return el("label", {}, el("span", {}, label), input);
}

function waitsBox() {
  const waits = T.task.waiting_for;
  if (!waits.length) return null;
  const live = DATA.server && !["succeeded", "failed", "cancelled"].includes(T.task.status);
  return el("section", { id: "waits", class: "box box-wait" },
    el("h2", {}, "Waits for"),
    el("ul", {}, waits.map((w) => el("li", { class: `waiter waiter-${w.kind}` },
      el("span", {}, waiterText(w)),
      w.id && el("code", { class: w.kind === "callback" ? "callback-id" : "id" }, w.id),
      w.url && el("a", { class: "callback-link", href: w.url }, "link to answer"),
      w.kind === "callback" && askedBox(w),
      live && w.kind === "callback" && w.id && answerForms(w),
      live && w.kind !== "callback" && DATA.server.answers[w.kind] && answerForm(w),
    ))));
}

// Another kind the server answers (its action, as the registry says it): its name, its id, a payload.
function answerForm(w) {
  const label = DATA.server.answers[w.kind];
  return form(w.kind, label[0].toUpperCase() + label.slice(1), [
    el("input", { type: "hidden", name: "name", value: w.name }),
    w.id ? el("input", { type: "hidden", name: "id", value: w.id }) : null,
    field("payload (JSON)", el("textarea", { name: "payload", rows: 2, placeholder: "null" })),
  ], `answer-wait answer-${w.kind}`);
}

// -- a callback's request and its answers (continuum/expects.py says what a request holds) ----

function readyAnswers(w) {
  const r = w.request;
  const answers = r && typeof r === "object" && !Array.isArray(r) && r.answers;
  return answers && typeof answers === "object" && !Array.isArray(answers) ? Object.entries(answers) : [];
}

function askedBox(w) {
  const r = w.request;
  if (r === null || r === undefined) return null;
  // The shape and the ready answers are for the buttons below, not for the person to read.
  const shown = typeof r === "object" && !Array.isArray(r)
    ? Object.fromEntries(Object.entries(r).filter(([k]) => k !== "expects" && k !== "answers")) : r;
  return el("div", { class: "asks" }, el("span", {}, "asks"), json(shown));
}

function answerForms(w) {
  const id = el("input", { type: "hidden", name: "callback_id", value: w.id });
  const ready = readyAnswers(w);
  const buttons = ready.map(([name, answer]) => form("callback", name[0].toUpperCase() + name.slice(1), [
    el("input", { type: "hidden", name: "callback_id", value: w.id }),
    el("input", { type: "hidden", name: "result", value: JSON.stringify(answer) }),
  ], `ready-answer ready-${name}`));
  const example = ready.length ? JSON.stringify(ready[0][1]) : "null";
  return [
    buttons.length ? el("div", { class: "ready-answers" }, buttons) : null,
    form("callback", "Complete callback", [
      id, field("result (JSON)", el("textarea", { name: "result", rows: 2, placeholder: example })),
    ], "complete-callback"),
  ];
}

function actionsBox() {
  if (DATA.server && T.task.status === "failed") {
    // Retry re-opens the failed turn from its last checkpoint (continuum retry TASK_ID).
    return el("section", { id: "actions", class: "box" },
      el("h2", {}, "Steer"), form("retry", "Retry task", [], "retry-task"));
  }
  if (!DATA.server || ["succeeded", "failed", "cancelled"].includes(T.task.status)) return null;
  const signal = T.task.waiting_for.find((w) => w.kind === "signal");
  return el("section", { id: "actions", class: "box" },
    el("h2", {}, "Steer"),
    form("signal", "Send signal", [
      field("name", el("input", { name: "name", required: true, value: signal ? signal.name : "" })),
      field("payload (JSON)", el("textarea", { name: "payload", rows: 2, placeholder: "null" })),
    ], "send-signal"),
    form("cancel", "Cancel task", [
      field("reason", el("input", { name: "reason", placeholder: "why (optional)" })),
    ], "cancel-task"));
}

function costBox() {
  const c = T.task.cost, u = T.task.usage;
  return el("section", { id: "cost", class: "box" },
    el("h2", {}, "Cost ", el("span", { class: "total" }, dollars(c.total))),
    el("p", {}, `Lambda ${dollars(c.lambda)} (${u.lambda_ms} ms billed over ` +
      `${plural(u.invocations, "invocation")}${T.summary.hops ? ", timer hops included" : ""}) · S3 ${dollars(c.s3)} (${u.s3_get} GET, ${u.s3_put} PUT, ${u.s3_list} ` +
      `LIST) · SQS ${dollars(c.sqs)} (${u.sqs_send} sent, ${u.sqs_receives} received)`));
}

// -- the timeline: one row per invocation, the gaps between them ------------------------------

function ticks(scale) {
  // Round steps (1, 2 or 5 times a power of ten) with four to eight of them on the scale.
  const raw = scale / 5, power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const at = [];
  // Not too near the end, where a label would run past the track.
  for (let t = 0; t <= scale * 0.88; t += step) at.push(t);
  return at;
}

function axis() {
  const marks = ticks(T.scale_s).map((t) => {
    const tick = el("span", { class: "tick" }, t === 0 ? "0" : duration(t));
    tick.style.left = pct(t, T.scale_s);
    return tick;
  });
  return el("div", { class: "row axis" },
    el("div", { class: "label" }, "invocation, since its start"),
    el("div", { class: "track" }, marks),
    el("div", { class: "end" }, "how it ended"));
}

function cpButtons(indices, start, extent) {
  return indices.map((i) => {
    const cp = T.checkpoints[i];
    const at = start === null ? 1 : (Date.parse(cp.saved_at) / 1000 - start) / extent;
    const button = el("button", {
      class: `cp cp-${cp.status}`, "data-index": i, type: "button",
      title: `checkpoint ${i + 1}: ${cp.status}, generation ${cp.generation}, turn ${cp.turn}`,
      onclick: (event) => { event.stopPropagation(); select({ checkpoint: i }); },
    });
    button.style.left = pct(at, 1);
    return button;
  });
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function took(run) {
  return run.duration_s === null && run.outcome === "crashed" ? "died" : duration(run.duration_s ?? run.extent_s);
}

function runRow(run) {
  const start = Date.parse(run.started_at) / 1000;
  const bar = el("div", { class: `bar bar-${run.outcome}` },
    run.steps.map((s) => {
      const step = el("span", {
        class: `step step-${s.outcome}`,
        title: `${s.key}${s.item ? ` (${s.item})` : ""}, turn ${s.turn}: ${duration(s.duration_s)}` +
          (s.attempts > 1 ? `, attempt ${s.attempts}` : "") + `, ${s.outcome}`,
      }, el("span", { class: "step-name" }, s.name));
      step.style.left = pct(s.at_s, run.extent_s || 1);
      step.style.width = pct(s.duration_s, run.extent_s || 1);
      return step;
    }));
  bar.style.width = pct(run.extent_s, T.scale_s);
  const lane = el("div", { class: "cps" }, cpButtons(run.checkpoints, start, T.scale_s));
  const reason = run.reason || "";
  return el("div", {
    class: `row run run-${run.outcome}`, id: `run-${run.number}`, "data-number": run.number,
    tabindex: 0, onclick: () => select({ run: run.number }),
    onkeydown: (e) => { if (e.key === "Enter") select({ run: run.number }); },
  },
    el("div", { class: "label" },
      el("b", {}, `#${run.number}`), " ", el("span", { class: "kind" }, run.message), " ",
      el("span", { class: "at" }, when(run.started_at).slice(5, 19)),
      el("div", { class: "sub" }, `${took(run)} · turn ` +
        `${run.turn}${run.turns ? `→${run.turn + run.turns}` : ""} · ${plural(run.steps_executed, "step")}` +
        (run.steps_replayed ? ` +${run.steps_replayed} replayed` : ""))),
    el("div", { class: "track" }, bar, lane),
    el("div", { class: `end end-${run.outcome}`, title: reason },
      el("span", { class: "icon" }, ICONS[run.outcome] || "?"), ` ${run.outcome}`,
      reason && el("div", { class: "sub" }, reason)));
}

function gapText(gap) {
  const waited = gap.waited_for.map(waiterText).join(", ");
  switch (gap.after) {
    case "waiting":
      return [gap.open ? `waiting: ${waited}` : waited,
        gap.hops && `${gap.hops} timer hops`, gap.woken_by && `woken by: ${gap.woken_by}`];
    case "suspended":
      return [gap.open ? "suspended: its continuation is queued" : "continued"];
    case "crashed":
      return ["its message came back after the visibility timeout"];
    default:
      return [gap.after];
  }
}

function gapRow(gap) {
  const label = gap.open ? `since ${when(gap.since).slice(5, 19)}` : duration(gap.seconds);
  const indices = gap.checkpoints || [];
  return el("div", { class: `row gap gap-${gap.after}${gap.open ? " gap-open" : ""}` },
    el("div", { class: "label" }, label),
    el("div", { class: "track" },
      el("span", { class: "gap-label" }, gapText(gap).filter(Boolean).join(" · "))),
    el("div", { class: "end" }, indices.length > 0 && el("button", {
      class: "cp-more", type: "button",
      onclick: () => select({ checkpoint: indices[indices.length - 1] }),
    }, `${indices.length} checkpoint${indices.length > 1 ? "s" : ""}`)));
}

function timeline() {
  const rows = T.rows.map((row) => (row.kind === "run" ? runRow(row) : gapRow(row)));
  return el("section", { id: "timeline" },
    el("h2", {}, "Invocations"),
    rows.length ? [axis(), ...rows] : el("p", {}, "No invocation has run yet."),
    el("p", { class: "legend" },
      ["ok", "retry", "failed", "paused", "preempted"].map((o) =>
        el("span", {}, el("i", { class: `step step-${o}` }), ` ${o} `)),
      el("span", {}, el("i", { class: "cp" }), " checkpoint (click for its state and journal)")));
}

function refill(n) {
  // After an error, the form that failed shows what was sent, to fix and send again.
  if (!n || !n.action) return;
  const forms = [...document.querySelectorAll(`form[action$="/${n.action}"]`)];
  const form = forms.find((f) => (!f.elements.callback_id ||
    f.elements.callback_id.value === n.fields.callback_id) && !f.classList.contains("ready-answer"));
  if (!form) return;
  for (const [name, value] of Object.entries(n.fields)) {
    if (form.elements[name] && form.elements[name].type !== "hidden") form.elements[name].value = value;
  }
}

// -- details: a checkpoint's state and journal, an invocation's steps --------------------------

function table(head, rows, cls) {
  return el("table", { class: cls }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
}

function checkpointDetail(i) {
  const cp = T.checkpoints[i];
  const journal = cp.journal.map((e) => [
    e.key, e.kind === "step" ? (e.ok ? (e.partial ? "partial" : "ok") : "failed") : e.kind,
    e.duration_s ? duration(e.duration_s) : "", e.error ? `${e.error.type}: ${e.error.message}`
      : json(e.result_ref ? { blob: e.result_ref.sha256 } : e.result),
  ]);
  return el("div", { class: "detail checkpoint", "data-index": i },
    el("h2", {}, `Checkpoint ${i + 1} of ${T.checkpoints.length}`),
    cp.row && el("p", { class: "sub" }, cp.row.kind === "run"
      ? `written by invocation #${cp.row.number}` : `written while it waited after #${cp.row.number}`),
    el("p", {}, el("span", { class: `status status-${cp.status}` }, cp.status),
      ` generation ${cp.generation} · turn ${cp.turn} · saved ${when(cp.saved_at)}`),
    cp.reason && el("p", { class: "sub" }, cp.reason),
    el("h3", {}, "State"),
    cp.state_missing ? el("p", {}, "(its blob is gone)") : el("div", { class: "state" }, json(cp.state)),
    el("h3", {}, `Journal of turn ${cp.turn}`),
    journal.length ? table(["key", "", "took", "result"], journal, "journal")
      : el("p", { class: "sub" }, "empty: the turn has recorded no step yet"));
}

function runDetail(number) {
  const run = T.rows.find((r) => r.kind === "run" && r.number === number);
  const steps = run.steps.map((s) =>
    [el("span", { class: "key" }, s.name, s.item && el("span", { class: "item" }, s.item)),
      s.turn, `+${duration(s.at_s)}`, duration(s.duration_s), s.attempts, s.outcome]);
  const last = run.checkpoints[run.checkpoints.length - 1];
  return el("div", { class: "detail invocation", "data-number": number },
    el("h2", {}, `Invocation #${number}`, " ", el("span", { class: "kind" }, run.message)),
    el("p", {}, `${when(run.started_at)} · ${took(run)} · `,
      el("span", { class: `status status-${run.outcome}` }, run.outcome)),
    run.reason && el("p", { class: "sub" }, run.reason),
    run.waiting_for.length > 0 && el("p", {}, `then waited for ${run.waiting_for.map(waiterText).join(", ")}`),
    el("h3", {}, `Steps (${run.steps_executed} run, ${run.steps_replayed} replayed)`),
    steps.length ? table(["step", "turn", "at", "took", "tries", ""], steps, "steps")
      : el("p", { class: "sub" }, run.outcome === "crashed"
        ? "none recorded: its worker died before it saved them" : "no step ran live"),
    run.steps_dropped > 0 && el("p", { class: "sub" }, `… and ${run.steps_dropped} earlier steps`),
    last !== undefined && checkpointDetail(last));
}

function select(what) {
  const panel = document.getElementById("details");
  panel.replaceChildren(what.run !== undefined ? runDetail(what.run)
    : what.checkpoint !== undefined ? checkpointDetail(what.checkpoint)
      : el("div", { class: "detail now" }, el("h2", {}, "State now"), json(T.task.state)));
  document.querySelectorAll(".selected").forEach((n) => n.classList.remove("selected"));
  const chosen = what.run !== undefined ? document.getElementById(`run-${what.run}`)
    : document.querySelector(`.cp[data-index="${what.checkpoint}"]`);
  if (chosen) chosen.classList.add("selected");
}

document.getElementById("app").append(el("div", {},
  header(), notice(), errorBox(), waitsBox(), actionsBox(), resultBox(), agentBox(), childrenBox(),
  el("div", { class: "columns" }, timeline(), el("aside", { id: "details" })), costBox()));
select(T.checkpoints.length ? { checkpoint: T.checkpoints.length - 1 } : {});
refill(DATA.notice);
document.body.dataset.rendered = "yes";
