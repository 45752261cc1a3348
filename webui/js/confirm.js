// A confirmation dialog for destructive actions: resolves true only when the person
// presses the action's button (Cancel, Escape or closing the dialog keep things as they are).

const $ = (id) => document.getElementById(id);

export function confirmAction(message, actionLabel = "Delete", title = "Are you sure?") {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = message;
  $("confirm-ok").textContent = actionLabel;
  return new Promise((resolve) => {
    const done = (answer) => {
      $("confirm-ok").removeEventListener("click", onOk);
      $("confirm-cancel").removeEventListener("click", onCancel);
      dialog.removeEventListener("close", onClose);
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const onOk = () => done(true);
    const onCancel = () => done(false);
    const onClose = () => done(false);
    $("confirm-ok").addEventListener("click", onOk);
    $("confirm-cancel").addEventListener("click", onCancel);
    dialog.addEventListener("close", onClose);
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}
