// Files waiting to be sent with the next message: from the Attach button, pasted into the
// message box, or dropped on it. Images show as thumbnails, other files by name; each can
// be removed before sending.

const $ = (id) => document.getElementById(id);
let pending = []; // [{file, url}] (url: an object URL for an image's thumbnail)

const IMAGE = /^image\/(png|jpeg|webp|gif)$/;

function pastedName(file, index) {
  // a pasted screenshot has a generic name (or none): give it a unique one
  if (file.name && file.name !== "image.png") return file.name;
  const ext = (file.type.split("/")[1] || "png").replace("jpeg", "jpg");
  const stamp = new Date().toISOString().replace(/[-:T]/g, "").slice(0, 14);
  return `pasted-${stamp}-${index}.${ext}`;
}

function add(files, pasted = false) {
  let index = pending.length;
  for (const original of files) {
    const file = pasted ? new File([original], pastedName(original, index), { type: original.type }) : original;
    index += 1;
    pending.push({ file, url: IMAGE.test(file.type) ? URL.createObjectURL(file) : null });
  }
  render();
}

function remove(index) {
  const [gone] = pending.splice(index, 1);
  if (gone?.url) URL.revokeObjectURL(gone.url);
  render();
}

function render() {
  const box = $("attach-preview");
  const nodes = pending.map((entry, index) => {
    const chip = document.createElement("figure");
    chip.className = "attach-chip";
    chip.setAttribute("data-testid", "attach-chip");
    if (entry.url) {
      const img = document.createElement("img");
      img.src = entry.url;
      img.alt = entry.file.name;
      img.setAttribute("data-testid", "attach-thumbnail");
      chip.append(img);
    }
    const name = document.createElement("figcaption");
    name.textContent = entry.file.name;
    const drop = document.createElement("button");
    drop.type = "button";
    drop.textContent = "×";
    drop.title = `Remove ${entry.file.name}`;
    drop.setAttribute("aria-label", `Remove ${entry.file.name}`);
    drop.addEventListener("click", () => remove(index));
    chip.append(name, drop);
    return chip;
  });
  box.replaceChildren(...nodes);
  box.hidden = nodes.length === 0;
  const count = pending.length;
  $("attach-count").textContent = count ? `${count} file${count > 1 ? "s" : ""}` : "";
}

export function files() {
  return pending.map((entry) => entry.file);
}

export function clear() {
  for (const entry of pending) if (entry.url) URL.revokeObjectURL(entry.url);
  pending = [];
  $("attach-input").value = "";
  render();
}

export function init() {
  const input = $("attach-input");
  input.addEventListener("change", () => {
    add([...input.files]);
    input.value = ""; // the same file can be chosen again
  });
  $("send-input").addEventListener("paste", (event) => {
    const pasted = [...(event.clipboardData?.files || [])];
    if (!pasted.length) return; // plain text pastes as usual
    event.preventDefault();
    add(pasted, true);
  });
  const form = $("send-form");
  form.addEventListener("dragover", (event) => {
    if (![...(event.dataTransfer?.types || [])].includes("Files")) return;
    event.preventDefault();
    form.classList.add("dropping");
  });
  form.addEventListener("dragleave", () => form.classList.remove("dropping"));
  form.addEventListener("drop", (event) => {
    form.classList.remove("dropping");
    const dropped = [...(event.dataTransfer?.files || [])];
    if (!dropped.length) return;
    event.preventDefault();
    add(dropped);
  });
}
