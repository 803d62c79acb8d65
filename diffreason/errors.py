"""User-facing errors: one clear message, never a traceback from the CLI."""


class DiffreasonError(Exception):
    """An error caused by what the user gave (a path, a template, an option), with a message that says how to fix it."""


def first_line(exc: BaseException) -> str:
    """An exception's message cut to its first line, or its type's name where it has none (one-line errors from
    libraries that raise many types with long messages)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class ModelLoadError(DiffreasonError):
    """A checkpoint directory is missing, corrupt, or not a DiffusionGemma checkpoint."""


class WrongModel(ModelLoadError):
    """A checkpoint that loads, but is another kind of model than the one asked for."""


class TemplateError(DiffreasonError):
    """A canvas template is malformed (empty allowed set, token out of range, length mismatch)."""


class ConfigError(DiffreasonError):
    """A sampler or engine option is out of range."""


class ContextTooLong(ConfigError):
    """A prompt and the answer it must hold (a template's length) need more positions than the model has."""


class SchemaError(DiffreasonError):
    """A JSON Schema the compiler cannot turn into a template, or not a valid one (names the keyword and its path)."""
