"""Recurrent layers' backend ops: not implemented for gingham yet (each raises)."""

from ._unsupported import unsupported, unsupported_module_getattr

rnn = unsupported("rnn.rnn")
lstm = unsupported("rnn.lstm")
gru = unsupported("rnn.gru")
bidirectional_lstm = unsupported("rnn.bidirectional_lstm")
bidirectional_gru = unsupported("rnn.bidirectional_gru")


def cudnn_ok(*args, **kwargs) -> bool:
    return False  # Keras then takes its generic path, whose ops report what is missing


__getattr__ = unsupported_module_getattr(__name__, "rnn")
