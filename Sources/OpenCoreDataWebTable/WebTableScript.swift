/// The page's script: it keeps the sections and a window of rows around the view, asks the server for missing rows
/// by index path over the socket, and applies each batch with UITableView's index-path rules — deletes and a move's
/// source before the batch, inserts and a move's destination after it — to the rows it holds and to the elements on
/// screen, which are keyed by object ID so that a moved row slides to its new place.
///
/// `window.ocdTable` exposes counters for tests and benchmarks: `applied` (batches applied), `lastApplied` (when the
/// last one reached the DOM, in milliseconds since the epoch), `firstRowsShown` (when the first rows were on screen,
/// in milliseconds since the page's navigation began), `rowsReceived`, `errors` and `connected`.
enum WebTableScript {
    static let source = #"""
        "use strict";
        (() => {
        const ROW = 28, HEADER = 30, MARGIN = 800, CHUNK = 100, KEEP = 2000;
        const scroller = document.getElementById("scroller"), spacer = document.getElementById("spacer");
        const statusBox = document.getElementById("status"), errorBox = document.getElementById("error");
        const table = window.ocdTable = { applied: 0, lastApplied: 0, rowsReceived: 0, errors: [], connected: false, firstRowsShown: 0, followInsert: false };
        let sections = [], caches = [], tops = [], total = 0, actions = [], socket = null, selected = null;
        const sectionEls = new Map(), rowEls = new Map(), pendingEls = [], inflight = new Set();

        const now = () => performance.timeOrigin + performance.now();
        const headerHeight = (s) => (sections.length === 1 && sections[0].name === "" ? 0 : HEADER);
        const send = (message) => { if (socket && socket.readyState === 1) socket.send(JSON.stringify(message)); };

        function layout() {
          tops = new Array(sections.length);
          let y = 0;
          for (let s = 0; s < sections.length; s++) { tops[s] = y; y += headerHeight(s) + sections[s].count * ROW; }
          total = y;
          spacer.style.height = y + "px";
          const rows = sections.reduce((n, s) => n + s.count, 0);
          statusBox.textContent = rows + (rows === 1 ? " row" : " rows") + (table.connected ? "" : " · disconnected");
        }

        function sectionAt(y) {
          let low = 0, high = sections.length - 1;
          while (low < high) { const mid = (low + high + 1) >> 1; if (tops[mid] <= y) low = mid; else high = mid - 1; }
          return Math.max(0, low);
        }

        function sectionElement(s) {
          const name = sections[s].name;
          let el = sectionEls.get(name);
          if (!el) {
            el = document.createElement("div");
            el.className = "section";
            el.dataset.sectionName = name;
            const header = document.createElement("div");
            header.className = "header";
            header.textContent = name;
            if (headerHeight(s) === 0) header.hidden = true;
            el.appendChild(header);
            sectionEls.set(name, el);
            spacer.appendChild(el);
          }
          el.style.top = tops[s] + "px";
          el.style.height = (headerHeight(s) + sections[s].count * ROW) + "px";
          return el;
        }

        function rowElement(row) {
          let el = rowEls.get(row.id);
          if (!el) {
            el = document.createElement("div");
            el.className = "row";
            el.dataset.objectId = row.id;
            el.appendChild(document.createElement("span"));
            for (const action of actions.filter((a) => a.scope === "row")) {
              const button = document.createElement("button");
              button.dataset.action = action.name;
              button.dataset.label = action.name === "delete" ? "✕" : action.title;
              button.title = action.title;
              button.setAttribute("aria-label", action.title);
              el.appendChild(button);
            }
            rowEls.set(row.id, el);
          }
          if (el.firstChild.textContent !== row.text) el.firstChild.textContent = row.text;
          return el;
        }

        function render() {
          const top = scroller.scrollTop - MARGIN, bottom = scroller.scrollTop + scroller.clientHeight + MARGIN;
          const seenSections = new Set(), seenRows = new Set();
          for (const el of pendingEls.splice(0)) el.remove();
          for (let s = sections.length ? sectionAt(top) : 0; s < sections.length && tops[s] < bottom; s++) {
            const el = sectionElement(s), h = headerHeight(s), cache = caches[s];
            seenSections.add(el);
            const first = Math.max(0, Math.floor((top - tops[s] - h) / ROW));
            const last = Math.min(sections[s].count - 1, Math.floor((bottom - tops[s] - h) / ROW));
            let missing = -1;
            for (let r = first; r <= last + 1; r++) {
              const row = r <= last ? cache.get(r) : undefined;
              if (row || r > last) {
                if (missing >= 0) { placeholder(el, h, missing, r); request(s, missing, r); missing = -1; }
                if (!row) continue;
                const rowEl = rowElement(row);
                if (rowEl.parentNode !== el) el.appendChild(rowEl);
                rowEl.style.top = (h + r * ROW) + "px";
                seenRows.add(row.id);
              } else if (missing < 0) missing = r;
            }
            if (cache.size > KEEP) for (const r of [...cache.keys()]) if (r < first - KEEP / 2 || r > last + KEEP / 2) cache.delete(r);
          }
          if (!table.firstRowsShown && seenRows.size) table.firstRowsShown = performance.now();
          for (const [name, el] of sectionEls) if (!seenSections.has(el)) { el.remove(); sectionEls.delete(name); }
          for (const [id, el] of rowEls) if (!seenRows.has(id)) { el.remove(); rowEls.delete(id); }
        }

        function placeholder(sectionEl, h, from, to) {
          const el = document.createElement("div");
          el.className = "pending";
          el.style.top = (h + from * ROW) + "px";
          el.style.height = ((to - from) * ROW) + "px";
          sectionEl.appendChild(el);
          pendingEls.push(el);
        }

        function request(s, from, to) {
          const start = Math.floor(from / CHUNK) * CHUNK, count = Math.ceil(to / CHUNK) * CHUNK - start;
          const key = sections[s].name + "\u0000" + start + "\u0000" + count;
          if (inflight.has(key)) return;
          inflight.add(key);
          send({ t: "rows", s, start, count, key });
        }

        function shift(old, removedRows, addedRows, out) {
          const removed = removedRows.sort((a, b) => a - b), added = addedRows.sort((a, b) => a - b);
          const entries = [...old.entries()].sort((a, b) => a[0] - b[0]);
          let ri = 0, ai = 0;
          for (const [r, row] of entries) {
            while (ri < removed.length && removed[ri] < r) ri++;
            if (ri < removed.length && removed[ri] === r) continue;
            let n = r - ri + ai;
            while (ai < added.length && added[ai] <= n) { ai++; n++; }
            out.set(n, row);
          }
        }

        function applyBatch(message) {
          const newSections = message.sections.map(([name, title, count]) => ({ name, title, count }));
          const deletedSections = new Set(), insertedSections = new Set(), removed = new Map(), added = new Map();
          const marks = [], dying = [];
          let firstInsert = null;
          const remove = (s, r) => { if (!removed.has(s)) removed.set(s, []); removed.get(s).push(r); };
          const add = (s, r, id, text) => { if (!added.has(s)) added.set(s, new Map()); added.get(s).set(r, { id, text }); };
          for (const c of message.changes) {
            switch (c[0]) {
              case "si": insertedSections.add(c[1]); break;
              case "sd": deletedSections.add(c[1]); break;
              case "i": add(c[1], c[2], c[3], c[4]); marks.push([c[3], "inserted"]); if (!firstInsert) firstInsert = [c[1], c[2]]; break;
              case "d": remove(c[1], c[2]); dying.push(c[3]); break;
              case "m": remove(c[1], c[2]); add(c[3], c[4], c[5], c[6]); marks.push([c[5], "moved"]); break;
              case "u": remove(c[1], c[2]); add(c[3], c[4], c[5], c[6]); marks.push([c[5], "updated"]); break;
            }
          }
          const oldNames = sections.map((s) => s.name);
          const survivors = [...sections.keys()].filter((s) => !deletedSections.has(s));
          const slots = [...newSections.keys()].filter((s) => !insertedSections.has(s));
          const newCaches = newSections.map(() => new Map());
          survivors.forEach((os, k) => {
            const ns = slots[k];
            shift(caches[os], removed.get(os) || [], [...(added.get(ns) || new Map()).keys()], newCaches[ns]);
          });
          for (const [ns, rows] of added) for (const [r, row] of rows) newCaches[ns].set(r, row);
          for (const id of dying) {
            const el = rowEls.get(id);
            if (!el) continue;
            rowEls.delete(id);
            fadeOut(el, "objectId");
          }
          for (const s of deletedSections) {
            const el = sectionEls.get(oldNames[s]);
            if (el && !newSections.some((n) => n.name === oldNames[s])) { sectionEls.delete(oldNames[s]); fadeOut(el, "sectionName"); }
          }
          sections = newSections;
          caches = newCaches;
          layout();
          if (firstInsert && table.followInsert) {
            // The page asked for an add: scroll to the new row, as the seeds scroll their table to it.
            table.followInsert = false;
            const y = tops[firstInsert[0]] + headerHeight(firstInsert[0]) + firstInsert[1] * ROW;
            if (y < scroller.scrollTop || y + ROW > scroller.scrollTop + scroller.clientHeight) {
              scroller.scrollTop = Math.max(0, y - scroller.clientHeight / 2);
            }
          }
          render();
          for (const s of insertedSections) flash(sectionEls.get(sections[s].name), "inserted");
          for (const [id, kind] of marks) flash(rowEls.get(id), kind);
          table.applied++;
          table.lastApplied = now();
        }

        function fadeOut(el, key) {
          el.dataset["deleted" + key[0].toUpperCase() + key.slice(1)] = el.dataset[key];
          delete el.dataset[key];
          el.classList.add("deleted");
          setTimeout(() => el.remove(), 350);
        }

        function flash(el, kind) {
          if (!el) return;
          el.classList.remove("inserted", "updated", "moved");
          void el.offsetWidth;
          el.classList.add(kind);
          setTimeout(() => el.classList.remove(kind), 900);
        }

        function hello(message) {
          document.getElementById("title").textContent = message.title;
          document.title = message.title;
          actions = message.actions;
          const bar = document.getElementById("actions");
          bar.replaceChildren(...actions.filter((a) => a.scope === "table").map((action) => {
            const button = document.createElement("button");
            button.textContent = action.title;
            button.dataset.action = action.name;
            return button;
          }));
          for (const el of sectionEls.values()) el.remove();
          sectionEls.clear(); rowEls.clear(); inflight.clear();
          sections = message.sections.map(([name, title, count]) => ({ name, title, count }));
          caches = sections.map(() => new Map());
          layout();
          const titles = [...new Set(sections.map((s) => s.title).filter((t) => t !== ""))];
          document.getElementById("index").replaceChildren(...titles.map((t) => {
            const link = document.createElement("a");
            link.textContent = t;
            link.dataset.indexTitle = t;
            return link;
          }));
          render();
        }

        function rows(message) {
          inflight.delete(message.key);
          const cache = caches[message.s];
          if (!cache) return;
          message.rows.forEach(([id, text], i) => cache.set(message.start + i, { id, text }));
          table.rowsReceived += message.rows.length;
          render();
        }

        function renameIDs(pairs) {
          // A save gave objects the page knows by temporary IDs their permanent ones.
          const map = new Map(pairs);
          for (const [old, id] of pairs) {
            const el = rowEls.get(old);
            if (!el) continue;
            rowEls.delete(old);
            rowEls.set(id, el);
            el.dataset.objectId = id;
          }
          for (const cache of caches) for (const row of cache.values()) if (map.has(row.id)) row.id = map.get(row.id);
        }

        function showError(text) {
          table.errors.push(text);
          errorBox.textContent = text;
          errorBox.hidden = false;
          clearTimeout(showError.timer);
          showError.timer = setTimeout(() => { errorBox.hidden = true; }, 6000);
        }

        function connect() {
          socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/changes?secret=" +
            encodeURIComponent(document.querySelector('meta[name="ocd-secret"]').content));
          socket.onopen = () => { table.connected = true; };
          socket.onmessage = (event) => {
            const message = JSON.parse(event.data);
            if (message.t === "batch") applyBatch(message);
            else if (message.t === "rows") rows(message);
            else if (message.t === "hello") hello(message);
            else if (message.t === "ids") renameIDs(message.ids);
            else if (message.t === "error") showError(message.message);
          };
          socket.onclose = () => { table.connected = false; layout(); setTimeout(connect, 1000); };
        }

        function act(name, row) {
          const message = { t: "action", name };
          if (!row) table.followInsert = true;
          if (row) message.id = row.dataset.objectId;
          send(message);
        }

        function select(el) {
          if (selected) selected.classList.remove("selected");
          selected = el;
          if (el) el.classList.add("selected");
        }

        document.addEventListener("click", (event) => {
          const button = event.target.closest("button[data-action]");
          const row = event.target.closest(".row[data-object-id]");
          const link = event.target.closest("#index a");
          if (button) act(button.dataset.action, row);
          else if (row) select(row);
          else if (link) {
            const s = sections.findIndex((x) => x.title === link.dataset.indexTitle);
            if (s >= 0) scroller.scrollTop = tops[s];
          }
        });
        document.addEventListener("keydown", (event) => {
          if (event.target.closest && event.target.closest("input, textarea")) return;
          const action = actions.find((a) => a.key && a.key === event.key);
          if (action) { act(action.name, action.scope === "row" ? selected : null); event.preventDefault(); return; }
          const step = { ArrowDown: 1, ArrowUp: -1 }[event.key];
          if (step && selected) {
            const next = [...rowEls.values()].filter((el) => el.isConnected && !el.classList.contains("deleted"))
              .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top);
            const i = next.indexOf(selected);
            if (next[i + step]) { select(next[i + step]); next[i + step].scrollIntoView({ block: "nearest" }); event.preventDefault(); }
          }
        });
        let scheduled = false;
        scroller.addEventListener("scroll", () => {
          if (scheduled) return;
          scheduled = true;
          requestAnimationFrame(() => { scheduled = false; render(); });
        });
        window.addEventListener("resize", render);
        connect();
        })();
        """#
}
