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

function makeSortable(list) {
  let dragged = null;
  list.addEventListener("dragstart", (e) => {
    dragged = e.target.closest("li.step");
    if (!dragged) return;
    dragged.classList.add("dragging");
    e.dataTransfer.effectAllowed = "move";
    e.dataTransfer.setData("text/plain", dragged.dataset.item);
  });
  list.addEventListener("dragend", () => {
    if (dragged) dragged.classList.remove("dragging");
    dragged = null;
    list.dispatchEvent(new Event("reordered"));
  });
  list.addEventListener("dragover", (e) => {
    if (!dragged) return;
    e.preventDefault();
    const over = e.target.closest("li.step");
    if (!over || over === dragged) return;
    const box = over.getBoundingClientRect();
    const after = e.clientY > box.top + box.height / 2;
    list.insertBefore(dragged, after ? over.nextSibling : over);
  });
  list.addEventListener("drop", (e) => e.preventDefault());
  // A drag the browser abandoned without dragend must not leave a step looking grabbed.
  list.addEventListener("pointerdown", () => {
    itemsOf(list).forEach((li) => li.classList.remove("dragging"));
  });
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
