"""Which exceptions the commands report as one ``error:`` line (status 2): ``UserError``
and ``FileNotFoundError``; anything else is a bug and keeps its traceback."""
import pytest

from t2t_lite.commands.common import run_reporting_errors
from t2t_lite.decoding.config import DecodeHParamsError
from t2t_lite.errors import UserError
from t2t_lite.hparams_lib import HParamsError
from t2t_lite.registry import UnknownNameError
from t2t_lite.runs.config import RunConfigMismatch


def _raise(error: BaseException):
    def body():
        raise error
    return body


def test_user_error_prints_one_line_and_returns_2(capsys):
    status = run_reporting_errors(_raise(UserError("--flag=3 is wrong; use 4")))
    err = capsys.readouterr().err
    assert status == 2
    assert err == "error: --flag=3 is wrong; use 4\n"


def test_missing_file_is_a_user_error(capsys):
    assert run_reporting_errors(_raise(FileNotFoundError("no such run"))) == 2
    assert capsys.readouterr().err == "error: no such run\n"


def test_plain_value_error_propagates_with_its_traceback(capsys):
    with pytest.raises(ValueError, match="shape mismatch"):
        run_reporting_errors(_raise(ValueError("shape mismatch")))
    assert "error:" not in capsys.readouterr().err


def test_failure_types_print_one_line_and_return_1(capsys):
    class Failed(RuntimeError):
        pass

    assert run_reporting_errors(_raise(Failed("loss is NaN")), (Failed,)) == 1
    assert capsys.readouterr().err == "error: loss is NaN\n"


def test_other_os_errors_are_bugs_that_keep_their_traceback(capsys):
    # Only FileNotFoundError among OSErrors is the user's; a PermissionError or a full
    # disk reaching the command (not converted where the user's path is used) propagates.
    for error in (PermissionError(13, "Permission denied"), OSError(28, "No space left")):
        with pytest.raises(type(error)):
            run_reporting_errors(_raise(error))
    assert "error:" not in capsys.readouterr().err


@pytest.mark.parametrize("error_type", [HParamsError, DecodeHParamsError, UnknownNameError,
                                        RunConfigMismatch])
def test_config_errors_are_user_errors_and_value_errors(error_type, capsys):
    assert issubclass(error_type, UserError) and issubclass(error_type, ValueError)
    assert run_reporting_errors(_raise(error_type("bad name"))) == 2
    assert capsys.readouterr().err == "error: bad name\n"


def test_unknown_name_error_is_still_a_key_error():
    with pytest.raises(KeyError):
        raise UnknownNameError("unknown model 'x'")
    assert str(UnknownNameError("unknown model 'x'")) == "unknown model 'x'"


def test_odd_hidden_size_with_sinusoids_is_an_hparams_error():
    from t2t_lite.hparams_lib import HParams
    with pytest.raises(HParamsError, match="'hidden_size' must be even"):
        HParams(hidden_size=63, num_heads=1)
    assert HParams(hidden_size=63, num_heads=1, pos="emb").hidden_size == 63
