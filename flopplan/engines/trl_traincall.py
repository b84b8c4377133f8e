"""``trainer.train`` of a metered GRPOTrainer (:func:`train_call`): Ctrl-C handled as :mod:`flopplan.engines.
trl_hook` says, and a second call on the same trainer metered as the same run.

A second ``train()`` on a metered trainer continues the run the meter holds: from a checkpoint
(``resume_from_checkpoint``, a larger ``max_steps``) it is metered on, its ledger going on from that checkpoint's;
from step 0 it is refused (two histories in one run; :class:`~flopplan.engines.trl_hook.FlopBudgetCallback`). Where
the run has nothing left to train (its ``max_steps`` reached, or its budget buys no further round) the second call
raises one line saying why: it returned None, training nothing, silently (a held-out user's script). A first call
that resumes a run over at its checkpoint ends it as it ended (its summary written) and returns None, as before.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from typing import Any

from flopplan.engines.trl_resume import resume_arguments
from flopplan.errors import UserError


class NoRoundFits(Exception):
    """Raised at ``on_train_begin`` of a resumed run whose next round does not fit its budget (what it spent, lost
    work included), or that reached its ``max_steps``."""


def train_call(train: Any, meter: Any, callback: Any) -> Any:
    """``train`` wrapped (see the module); ``callback``: the meter's FlopBudgetCallback."""
    ctrl_c = callback.ctrl_c

    @functools.wraps(train)
    def train_until_ctrl_c(*args: Any, **kwargs: Any) -> Any:
        folder = meter.folder if meter.owns_folder else None
        if kwargs.get("trial", args[1] if len(args) > 1 else None) is not None:  # every backend passes its trial
            if folder is not None:
                folder.unlock()  # nothing was written: another trainer may meter into it in this process
            raise UserError("trainer.hyperparameter_search trains one run per trial with this trainer, and a meter "
                            "meters one run: meter a trainer per trial (each with its own out and budget), or "
                            "compare the trials' settings with flopplan race")
        ctrl_c.requested = callback.ctrl_c_anywhere = False  # a new call (the same trainer resumed in a notebook)
        # starts without a stop
        args, kwargs = resume_arguments(args, kwargs, callback.trainer.args.output_dir)
        callback.resume_from = kwargs.get("resume_from_checkpoint", args[0] if args else None)
        again = callback.calls > 0
        callback.calls += 1
        if meter.decision.reason == "interrupted" or again:  # (trained further: max_steps is checked again)
            meter.guard.resume(steps=again)
            callback.stopped = False
        if again and folder is not None:
            folder.lock()  # (the first call's end unlocked it)
        main = threading.current_thread() is threading.main_thread()
        callback.training = True
        try:
            with ctrl_c.handling() if main else contextlib.nullcontext():
                try:
                    result = train(*args, **kwargs)
                except NoRoundFits:  # the run was over at its checkpoint: end it as it ended (its summary written)
                    trainer = callback.trainer
                    trainer.callback_handler.on_train_end(trainer.args, trainer.state, trainer.control)
                    if again:
                        how = "raise trainer.args.max_steps to train it further" \
                            if meter.decision.reason == "steps" else "its budget buys no further round"
                        raise UserError(f"trainer.train() trained nothing: the run is over ({meter.decision.message})"
                                        f": {how}") from None
                    result = None
        finally:
            callback.training = False
            meter.notes[:] = dict.fromkeys(meter.notes)  # each note once (a call again, a resume, say some again)
        if meter.decision.reason == "budget" and meter.says_budget_stop and \
                callback.trainer.accelerator.is_main_process:  # (training just ended, short of max_steps)
            print(f"flopplan: the run stopped, its budget spent: {meter.decision.message}", file=sys.stderr)
        if (ctrl_c.requested or callback.ctrl_c_anywhere) and meter.raise_on_ctrl_c:  # the script stops, however
            # the run ended, on every process (the stop after a Ctrl-C to one of them is every process's)
            raise KeyboardInterrupt(meter.decision.message)
        return result

    return train_until_ctrl_c


__all__ = ["NoRoundFits", "train_call"]
