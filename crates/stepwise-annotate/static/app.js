// stepwise annotate: drag-and-drop ordering that also works from the keyboard, and the alternatives list.
// No framework, no build: the server renders the page; this only moves list items and fills hidden fields.
"use strict";


function itemsOf(list) {
  return Array.from(list.querySelectorAll("li.step"));
}

function currentOrder(list) {
  return itemsOf(list).map((li) => Number(li.dataset.item));
}

// Screen readers hear the new position in a live region (an aria-label would hide the step's own text).
function announce(list, li) {
  const pos = itemsOf(list).indexOf(li) + 1;
  const region = document.getElementById("announce");
  if (region) region.textContent = "Moved to position " + pos + " of " + itemsOf(list).length + ".";
}

function move(list, li, delta) {
  const items = itemsOf(list);
  const i = items.indexOf(li);
  const j = i + delta;
  if (j < 0 || j >= items.length) return;
  if (delta < 0) list.insertBefore(li, items[j]);
  else list.insertBefore(li, items[j].nextSibling);
  li.focus();
  announce(list, li);
  list.dispatchEvent(new Event("reordered"));
}

// Dragging follows pointer events (mouse, pen and touch alike) rather than HTML5 drag and drop: native drag and
// drop never starts from a touch screen, and browsers driven by WebDriver do not carry pointer input into
// dragover/drop, so the Firefox test could not exercise it.
function makeSortable(list) {
  let drag = null; // { li, pointerId, startY, moved, home: the step it was before, null when last }
  // Moves and the release are heard on the window, not through pointer capture: moving the step in the DOM
  // releases any capture it holds, which would end the drag at its first move.
  const onMove = (e) => {
    if (!drag || e.pointerId !== drag.pointerId) return;
    if (e.pointerType !== "touch" && e.buttons === 0) { finish(e); return; } // mouse or pen released outside the window
    if (!drag.moved) {
      if (Math.abs(e.clientY - drag.startY) < 4) return; // a click, not a drag
      drag.moved = true;
      drag.li.classList.add("dragging");
    }
    e.preventDefault();
    // The dragged step goes before the first other step whose middle is below the pointer (else last): moving
    // it changes no other step's order among themselves, so the answer never flickers between two places.
    const next = itemsOf(list).find((li) => {
      if (li === drag.li) return false;
      const box = li.getBoundingClientRect();
      return e.clientY < box.top + box.height / 2;
    });
    if (next) {
      if (drag.li.nextElementSibling !== next) list.insertBefore(drag.li, next);
    } else if (list.lastElementChild !== drag.li) {
      list.appendChild(drag.li);
    }
    // Near the window's top or bottom edge the page scrolls, so a step can travel past what is in view.
    const edge = 48;
    if (e.clientY < edge) window.scrollBy(0, -24);
    else if (e.clientY > window.innerHeight - edge) window.scrollBy(0, 24);
  };
  const finish = (e) => {
    if (!drag || e.pointerId !== drag.pointerId) return;
    const { li, moved } = drag;
    drag = null;
    window.removeEventListener("pointermove", onMove);
    window.removeEventListener("pointerup", finish);
    window.removeEventListener("pointercancel", finish);
    window.removeEventListener("keydown", onEscape, true);
    li.classList.remove("dragging");
    if (moved) {
      li.focus({ preventScroll: true });
      announce(list, li);
      list.dispatchEvent(new Event("reordered"));
    }
  };
  // Escape puts the step back where the drag took it from.
  const onEscape = (e) => {
    if (!drag || e.key !== "Escape") return;
    e.preventDefault();
    list.insertBefore(drag.li, drag.home); // the other steps never change places, so `home` is still in the list
    finish({ pointerId: drag.pointerId });
  };
  list.addEventListener("pointerdown", (e) => {
    if (drag || e.button !== 0 || e.target.closest("button")) return;
    const li = e.target.closest("li.step.movable");
    if (!li || !list.contains(li)) return;
    // On a touch screen only the handle drags, so a finger elsewhere still scrolls the page.
    if (e.pointerType === "touch" && !e.target.closest(".handle")) return;
    e.preventDefault(); // no text selection, no native image drag
    li.focus({ preventScroll: true });
    drag = { li, pointerId: e.pointerId, startY: e.clientY, moved: false, home: li.nextElementSibling };
    window.addEventListener("pointermove", onMove);
    window.addEventListener("pointerup", finish);
    window.addEventListener("pointercancel", finish);
    window.addEventListener("keydown", onEscape, true);
  });
  // Photos and links inside a step must not start the browser's own drag.
  list.addEventListener("dragstart", (e) => e.preventDefault());
  list.addEventListener("click", (e) => {
    const btn = e.target.closest("button");
    if (!btn) return;
    const li = btn.closest("li.step");
    if (btn.classList.contains("up")) move(list, li, -1);
    if (btn.classList.contains("down")) move(list, li, 1);
  });
  list.addEventListener("keydown", (e) => {
    const li = e.target.closest("li.step");
    if (!li || e.target !== li || !e.altKey) return;
    if (e.key === "ArrowUp") { e.preventDefault(); move(list, li, -1); }
    if (e.key === "ArrowDown") { e.preventDefault(); move(list, li, 1); }
  });
}

function setupOrdering(form, list) {
  const field = document.getElementById("order");
  const fill = () => { field.value = currentOrder(list).join(","); };
  fill();
  list.addEventListener("reordered", fill);
  form.addEventListener("submit", fill);
}

function setupAlternatives(form, list) {
  const field = document.getElementById("alternatives");
  const original = field.dataset.original;
  const MAX_ALTERNATIVES = Number(field.dataset.max); // the server's limit, rendered into the page
  const shown = document.getElementById("alt-list");
  const count = document.getElementById("alt-count");
  const error = document.getElementById("alt-error");
  const alternatives = [];
  const originalItems = itemsOf(list);
  const render = () => {
    field.value = JSON.stringify(alternatives);
    count.textContent = String(alternatives.length);
    shown.replaceChildren(...alternatives.map((order, k) => {
      const li = document.createElement("li");
      li.textContent = "steps in the order " + order.map((x) => originalPosition(x)).join(" → ") + " ";
      const rm = document.createElement("button");
      rm.type = "button";
      rm.textContent = "Remove";
      rm.className = "remove";
      rm.addEventListener("click", () => { alternatives.splice(k, 1); render(); });
      li.appendChild(rm);
      return li;
    }));
  };
  // Positions in the original order (1-based) describe an alternative to the person.
  const originalOrder = original.split(",").map(Number);
  const originalPosition = (item) => originalOrder.indexOf(item) + 1;
  document.getElementById("add-order").addEventListener("click", () => {
    const order = currentOrder(list);
    error.textContent = "";
    if (order.join(",") === original) { error.textContent = "This is the original order: move some steps first."; return; }
    if (alternatives.some((a) => a.join(",") === order.join(","))) { error.textContent = "You already added this order."; return; }
    if (alternatives.length >= MAX_ALTERNATIVES) { error.textContent = "At most " + MAX_ALTERNATIVES + " alternative orders per item."; return; }
    alternatives.push(order);
    render();
  });
  document.getElementById("reset-order").addEventListener("click", () => {
    originalItems.forEach((li) => list.appendChild(li));
    error.textContent = "";
  });
  render();
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("answer");
  const list = document.getElementById("steps");
  if (!form || !list) return;
  makeSortable(list);
  if (form.dataset.kind === "alternatives") setupAlternatives(form, list);
  else setupOrdering(form, list);
  // A double click on Submit must not send twice (the server would ignore the repeat anyway); a page restored
  // by the Back button after an error gets its button back.
  const submit = document.getElementById("submit");
  form.addEventListener("submit", () => { setTimeout(() => { submit.disabled = true; }, 0); });
  window.addEventListener("pageshow", () => { submit.disabled = false; });
});
