"""Which files each tool reads or runs before it does its work, and in which language (data only).

A file written in the same command and then read by the tool that runs next is judged as what
it is (written_code.py): shell, python, ruby or node code, make recipes, package scripts, tox
commands, or configuration keys that run programs. "opaque" files (Gradle, sbt, build.rs) are
code this engine does not read: written in the same command, they ask.
"""

from __future__ import annotations

# JavaScript tools load `*.config.js` and friends as code when they start.
_JS_CODE: tuple[tuple[str, str], ...] = tuple(
    (f"{stem}.{ext}", "node")
    for stem in ("*.config", "*.conf", ".eslintrc", ".babelrc", ".prettierrc", ".mocharc", ".stylelintrc",
                 ".lintstagedrc", ".commitlintrc", ".releaserc", ".swcrc", "gulpfile", "Gruntfile",
                 "gulpfile.babel", "jakefile", "Jakefile", ".pnpmfile", "*.setup")
    for ext in ("js", "cjs", "mjs", "ts", "cts", "mts", "jsx", "tsx")
)  # fmt: skip
_JS_CONFIGS: tuple[tuple[str, str], ...] = (
    *_JS_CODE, ("package.json", "package"), (".npmrc", "config"), (".yarnrc", "config"),
    (".yarnrc.yml", "config"),
     ("bunfig.toml", "config"), ("pnpm-workspace.yaml", "config"), ("pnpmfile.cjs", "node"),
     ("deno.json", "config"), ("deno.jsonc", "config"), ("nx.json", "config"), ("turbo.json", "config"),
     ("project.json", "config"))  # fmt: skip
# Every python run imports these from its path (the cwd, PYTHONPATH=.) before the program.
_PY_STARTUP: tuple[tuple[str, str], ...] = (
    ("sitecustomize.py", "python"), ("usercustomize.py", "python"), ("*.pth", "python"),
)  # fmt: skip
_PY_PROJECT: tuple[tuple[str, str], ...] = (
    ("setup.cfg", "config"), ("pyproject.toml", "config"), ("setup.py", "python"),
)  # fmt: skip

JS_TOOLS = frozenset(
    """npm npx yarn pnpm pnpx bun bunx node deno jest vitest vite webpack webpack-cli rollup babel eslint
    prettier postcss tailwindcss tailwind next nuxt nuxi astro svelte-kit remix gatsby parcel esbuild
    tsup tsx ts-node mocha ava playwright cypress karma gulp grunt jake nx turbo lerna stylelint
    lint-staged commitlint semantic-release storybook vue-cli-service ng react-scripts expo tsc
    ember rspack rsbuild wrangler""".split()  # noqa: SIM905
)
PYTHON_TOOLS = frozenset(
    """python python2 python3 pytest py.test tox nox mypy coverage pip pip3 pipx mkdocs sphinx-build
    django-admin flake8 black pylint isort bandit pyright hatch pdm poetry uv uvx twine pre-commit
    invoke fab celery gunicorn uvicorn flask alembic jupyter ipython streamlit dbt ansible
    ansible-playbook scrapy locust behave unittest manage.py""".split()  # noqa: SIM905
)

# tool → the files it reads or runs from its working tree (basename patterns), with their kind.
TOOL_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "make": (("Makefile", "make"), ("makefile", "make"), ("GNUmakefile", "make"), ("*.mk", "make")),
    "gmake": (("Makefile", "make"), ("makefile", "make"), ("GNUmakefile", "make"), ("*.mk", "make")),
    "pytest": (
        ("pytest.ini", "config"),
        (".pytest.ini", "config"),
        ("tox.ini", "config"),
        ("conftest.py", "python"),
        *_PY_PROJECT,
    ),
    "tox": (("tox.ini", "tox"), ("tox.toml", "tox"), ("conftest.py", "python"), *_PY_PROJECT),
    "nox": (("noxfile.py", "python"), *_PY_PROJECT),
    "mkdocs": (("mkdocs.yml", "config"), ("mkdocs.yaml", "config"), ("*.py", "python")),
    "sphinx-build": (("conf.py", "python"),),
    "pip": (
        ("requirements*.txt", "config"),
        ("constraints*.txt", "config"),
        ("pip.conf", "config"),
        *_PY_PROJECT,
    ),
    "pip3": (("requirements*.txt", "config"), ("pip.conf", "config"), *_PY_PROJECT),
    "uv": (("uv.toml", "config"), *_PY_PROJECT),
    "poetry": (("poetry.toml", "config"), *_PY_PROJECT),
    "hatch": (("hatch.toml", "config"), *_PY_PROJECT),
    "pdm": _PY_PROJECT,
    "python": _PY_PROJECT,
    "python3": _PY_PROJECT,
    "mypy": (("mypy.ini", "config"), (".mypy.ini", "config"), *_PY_PROJECT),
    "ruff": (("ruff.toml", "config"), (".ruff.toml", "config"), ("pyproject.toml", "config")),
    "coverage": ((".coveragerc", "config"), *_PY_PROJECT),
    "pre-commit": ((".pre-commit-config.yaml", "config"),),
    "invoke": (("tasks.py", "python"),),
    "fab": (("fabfile.py", "python"),),
    "cargo": (
        ("Cargo.toml", "cargo"),
        ("build.rs", "opaque"),
        ("config.toml", "config"),
        ("config", "config"),
        ("rust-toolchain.toml", "config"),
        ("rust-toolchain", "config"),
    ),
    "go": (("go.mod", "gomod"), ("go.work", "gomod"), ("go.env", "config")),
    "git": (
        (".gitconfig", "config"),
        ("config", "config"),
        (".gitattributes", "gitattributes"),
        (".gitmodules", "config"),
        ("pre-commit", "script"),
        ("commit-msg", "script"),
        ("pre-push", "script"),
        ("post-checkout", "script"),
        ("post-commit", "script"),
        ("prepare-commit-msg", "script"),
        ("post-merge", "script"),
        ("pre-rebase", "script"),
        ("pre-merge-commit", "script"),
        ("post-rewrite", "script"),
        ("pre-auto-gc", "script"),
        ("reference-transaction", "script"),
        ("fsmonitor-watchman", "script"),
        ("post-index-change", "script"),
    ),
    "bundle": (("Gemfile", "ruby"), ("gems.rb", "ruby"), (".bundle/config", "config"), ("config", "config")),
    "rake": (("Rakefile", "ruby"), ("rakefile", "ruby"), ("Rakefile.rb", "ruby"), ("*.rake", "ruby")),
    "rspec": (
        (".rspec", "rspec"),
        (".rspec-local", "rspec"),
        ("spec_helper.rb", "ruby"),
        ("rails_helper.rb", "ruby"),
        ("Gemfile", "ruby"),
    ),
    "rails": (("Gemfile", "ruby"), ("Rakefile", "ruby"), ("*.rb", "ruby"), ("*.rake", "ruby")),
    "ruby": ((".rubyrc", "config"),),
    "gradle": (
        ("build.gradle", "opaque"),
        ("build.gradle.kts", "opaque"),
        ("settings.gradle", "opaque"),
        ("settings.gradle.kts", "opaque"),
        ("init.gradle", "opaque"),
        ("*.init.gradle", "opaque"),
        ("gradle.properties", "config"),
        ("gradle-wrapper.properties", "config"),
    ),
    "mvn": (
        ("pom.xml", "pom"),
        ("maven.config", "opaque"),
        ("jvm.config", "opaque"),
        ("extensions.xml", "opaque"),
        ("settings.xml", "pom"),
        ("maven-wrapper.properties", "config"),
    ),
    "sbt": (
        ("build.sbt", "opaque"),
        ("*.sbt", "opaque"),
        ("*.scala", "opaque"),
        ("build.properties", "config"),
        (".sbtopts", "opaque"),
        (".jvmopts", "opaque"),
    ),
    "ant": (("build.xml", "opaque"),),
    "cmake": (
        ("CMakeLists.txt", "cmake"),
        ("*.cmake", "cmake"),
        ("CMakePresets.json", "opaque"),
        ("CMakeUserPresets.json", "opaque"),
    ),
    "ctest": (("CTestTestfile.cmake", "cmake"),),
    "ninja": (("build.ninja", "opaque"),),
    "meson": (("meson.build", "opaque"), ("meson_options.txt", "config")),
    "bazel": (
        ("BUILD", "opaque"),
        ("BUILD.bazel", "opaque"),
        ("WORKSPACE", "opaque"),
        ("MODULE.bazel", "opaque"),
        ("*.bzl", "opaque"),
        (".bazelrc", "opaque"),
    ),
    "direnv": ((".envrc", "shell"), (".env", "shell")),
    "docker": (
        ("Dockerfile", "opaque"),
        ("*.Dockerfile", "opaque"),
        ("Containerfile", "opaque"),
        ("docker-compose.yml", "opaque"),
        ("docker-compose.yaml", "opaque"),
        ("compose.yml", "opaque"),
        ("compose.yaml", "opaque"),
        ("docker-bake.hcl", "opaque"),
    ),
    "podman": (("Dockerfile", "opaque"), ("Containerfile", "opaque"), ("compose.yaml", "opaque")),
    "docker-compose": (
        ("docker-compose.yml", "opaque"),
        ("docker-compose.yaml", "opaque"),
        ("compose.yml", "opaque"),
        ("compose.yaml", "opaque"),
    ),
    "composer": (("composer.json", "package"),),
    "phpunit": (("phpunit.xml", "opaque"), ("phpunit.xml.dist", "opaque")),
    "mix": (("mix.exs", "opaque"), ("*.exs", "opaque")),
    "dotnet": (
        ("*.csproj", "opaque"),
        ("*.fsproj", "opaque"),
        ("*.sln", "opaque"),
        ("Directory.Build.props", "opaque"),
        ("Directory.Build.targets", "opaque"),
        ("global.json", "config"),
        ("nuget.config", "opaque"),
    ),
    "swift": (("Package.swift", "opaque"),),
    "just": (("justfile", "make"), ("Justfile", "make"), (".justfile", "make")),
    "task": (("Taskfile.yml", "opaque"), ("Taskfile.yaml", "opaque")),
}
for _tool in JS_TOOLS:
    TOOL_FILES[_tool] = TOOL_FILES.get(_tool, ()) + _JS_CONFIGS
for _tool in PYTHON_TOOLS:
    TOOL_FILES[_tool] = TOOL_FILES.get(_tool, ()) + _PY_STARTUP
TOOL_FILES["./gradlew"] = TOOL_FILES["gradlew"] = TOOL_FILES["gradle"]
TOOL_FILES["./mvnw"] = TOOL_FILES["mvnw"] = TOOL_FILES["mvn"]
TOOL_FILES["docker-buildx"] = TOOL_FILES["buildah"] = TOOL_FILES["podman"]


def tool_files(program: str) -> tuple[tuple[str, str], ...]:
    """(basename pattern, kind) of what `program` reads or runs from its working tree."""
    return TOOL_FILES.get(program, ())
