"""Subcommand tables: for each program with subcommands, the ones known to act only locally.

Data only; `approvals/permissions/risk/subcommands.py` applies it. A subcommand missing here asks
(`mvn deploy`, `npm token`, `gradle publishToMavenLocal`), so add what ordinary work needs here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True, slots=True)
class Tool:
    """What is known about a program's subcommands."""

    # Subcommands (or goals, tasks) that only build, test, lint or read locally.
    subs: frozenset[str]
    # Global options that take a separate value (skipped when looking for the subcommand).
    valued: frozenset[str] = frozenset()
    # Every operand is a goal or task (`mvn clean test`, `gradle build check`).
    goals: bool = False
    # An operand that is not a built-in names a project script (`make lint`, `yarn build`):
    # the project's own code, allowed unless its name says it installs, deploys or publishes.
    scripts: bool = False
    # Built-ins that must not be mistaken for a project script (they ask).
    builtins: frozenset[str] = frozenset()
    # Subcommands whose own subcommand is checked too (`npm config get` yes, `npm config set` asks).
    nested: dict[str, frozenset[str]] = field(default_factory=dict)
    # Options, anywhere, whose value the program runs (or that run code themselves).
    code: frozenset[str] = frozenset()
    # Words starting with these characters before the subcommand are skipped (`cargo +nightly`).
    skip_prefix: str = ""


# Script or target names that say they reach beyond the workspace.
SIDE_EFFECT_NAMES = _words(
    "install uninstall deploy publish release upload push dist-upload docker-push gh-deploy "
    "publishLocal publishToMavenLocal publishM2"
)

_NPM_VALUED = _words(
    "--prefix -C -w --workspace --userconfig --globalconfig --cache --loglevel --registry --scope "
    "--tag --otp --script-shell --node-options --color"
)
_NPM_LOCAL = _words(
    "test t tst run run-script rum urn start stop restart ls list ll la help root bin prefix "
    "explain why query version --version -v -h --help help-search pkg completion config get"
)
_YARN_LOCAL = _words(
    "run test exec bin list ls --version -v help --help -h workspaces workspace info why config "
    "constraints explain node"
)
_YARN_BUILTINS = _words(
    "add remove install up upgrade upgrade-interactive dlx npm plugin set publish pack login logout "
    "owner team tag import link unlink global policies create init patch patch-commit unplug "
    "rebuild version stage dedupe autoclean cache audit outdated licenses generate-lock-entry "
    "check import self-update token"
)
_PNPM_LOCAL = _words("run test t exec start list ls why root bin --version -v help -h --help")
_PNPM_BUILTINS = _words(
    "add remove rm uninstall install i update up upgrade dlx create publish pack link unlink "
    "import rebuild store server setup env deploy patch patch-commit audit outdated prune fetch "
    "licenses config self-update login logout token"
)
_CARGO_LOCAL = _words(
    "build b check c test t bench run r doc d fmt clippy clean tree metadata locate-project pkgid "
    "verify-project version help rustc rustdoc fix package nextest llvm-cov tarpaulin expand "
    "watch --version -V --help -h --list"
)
_GO_LOCAL = _words("build test vet fmt run mod list env version doc generate clean tool work help fix")
_MVN_GOALS = _words(
    """
    clean validate initialize generate-sources process-sources generate-resources process-resources
    compile process-classes generate-test-sources process-test-sources generate-test-resources
    process-test-resources test-compile process-test-classes test prepare-package package
    pre-integration-test integration-test post-integration-test verify site
    dependency:tree dependency:list dependency:analyze dependency:build-classpath help:effective-pom
    help:describe help:active-profiles spotless:apply spotless:check checkstyle:check checkstyle:checkstyle
    jacoco:report jacoco:check surefire:test failsafe:integration-test failsafe:verify compiler:compile
    compiler:testCompile javadoc:javadoc exec:java spring-boot:run spring-boot:repackage quarkus:dev
    quarkus:build pmd:check spotbugs:check enforcer:enforce resources:resources jar:jar war:war
    fmt:format fmt:check license:check versions:help clean:clean install:help
    """
)
_MVN_VALUED = _words(
    "-f --file -s --settings -gs --global-settings -t --toolchains -P --activate-profiles -pl "
    "--projects -rf --resume-from -T --threads -l --log-file -D --define -b --builder"
)
_GRADLE_TASKS = _words(
    """
    build test check assemble clean jar bootJar bootRun run compileJava compileKotlin
    compileTestJava compileTestKotlin compileGroovy classes testClasses javadoc tasks dependencies
    dependencyInsight projects properties help lint lintDebug lintRelease assembleDebug
    assembleRelease bundleDebug testDebugUnitTest testReleaseUnitTest spotlessApply spotlessCheck
    ktlintCheck ktlintFormat detekt jacocoTestReport jacocoTestCoverageVerification integrationTest
    shadowJar installDist distZip distTar buildEnvironment components outgoingVariants
    checkstyleMain checkstyleTest pmdMain spotbugsMain processResources processTestResources
    compileTestGroovy war ear koverReport koverVerify apiCheck apiDump allTests jvmTest jsTest
    """
)
_GRADLE_VALUED = _words(
    "-x --exclude-task -p --project-dir -b --build-file -c --settings-file -g --gradle-user-home "
    "--tests --console --warning-mode --max-workers -D -P --priority --include-build -I --init-script"
)
_SBT_TASKS = _words(
    """
    compile test run clean package assembly testOnly testQuick Test/compile Test/test scalafmt
    scalafmtCheck scalafmtAll scalafmtSbt scalafmtSbtCheck reload projects doc update
    dependencyTree evicted it:test IntegrationTest/test coverage coverageReport
    coverageAggregate scalastyle headerCheck headerCreate clean-files version about
    """
)
_MAKE_VALUED = _words(
    "-C --directory -j --jobs -l --load-average -o --old-file -W --what-if -I --include-dir"
)

TOOLS: dict[str, Tool] = {
    "npm": Tool(
        _NPM_LOCAL,
        _NPM_VALUED,
        nested={"config": _words("get list ls"), "pkg": _words("get set delete fix")},
        code=_words("--script-shell --node-options"),
    ),
    "yarn": Tool(
        _YARN_LOCAL,
        _words("--cwd --cache-folder --modules-folder"),
        scripts=True,
        builtins=_YARN_BUILTINS,
        nested={"config": _words("get list")},
    ),
    "pnpm": Tool(
        _PNPM_LOCAL, _words("-C --dir -w --filter -F --workspace-root"), scripts=True, builtins=_PNPM_BUILTINS
    ),
    "cargo": Tool(
        _CARGO_LOCAL,
        _words("-C -Z --color --config --manifest-path --target-dir"),
        code=_words("--config"),
        skip_prefix="+",
    ),
    "rustup": Tool(
        _words("show which --version -V help --help -h check"),
        nested={"show": _words("active-toolchain home profile")},
    ),
    "go": Tool(
        _GO_LOCAL,
        _words("-C"),
        nested={
            "mod": _words("graph verify why edit init tidy"),
            "work": _words("init use edit sync"),
        },
        code=_words("-toolexec -exec --toolexec --exec -vettool --vettool"),
    ),
    "mvn": Tool(_MVN_GOALS, _MVN_VALUED, goals=True),
    "gradle": Tool(_GRADLE_TASKS, _GRADLE_VALUED, goals=True, code=_words("-I --init-script --scan")),
    "sbt": Tool(_SBT_TASKS, _words("-D -J --client"), goals=True),
    "make": Tool(
        frozenset(),
        _MAKE_VALUED | _words("-f --file --makefile"),
        goals=True,
        scripts=True,
        code=_words("--eval -E"),
    ),
    "rake": Tool(
        _words("test spec default -T --tasks -P"),
        _words("-f --rakefile -I -C --directory"),
        goals=True,
        scripts=True,
        code=_words("-e --execute -E --execute-continue -p --execute-print"),
    ),
    "ant": Tool(frozenset(), _words("-f -buildfile -file -lib -logfile -l -D"), goals=True, scripts=True),
    "ninja": Tool(frozenset(), _words("-C -f -j -k -l -d -w -t"), goals=True, scripts=True),
    "bundle": Tool(_words("exec check list show info outdated-local config version --version help")),
    "pip": Tool(
        _words("list show freeze check help --version -V debug inspect hash cache config"),
        _words("--python --log"),
        nested={"cache": _words("dir info list"), "config": _words("list get debug")},
    ),
    "coverage": Tool(_words("run report html xml json lcov erase combine debug annotate help")),
    "tox": Tool(
        _words("run r run-parallel p list l config c depends de legacy le --version --help -h"),
        _words("-e -c --conf --root --workdir -x --override -p --parallel"),
        nested={},
    ),
    "pre-commit": Tool(
        _words("run clean gc validate-config validate-manifest sample-config migrate-config help --version")
    ),
    "ruff": Tool(_words("check format rule config linter version clean analyze --version -V help")),
    "vitest": Tool(_words("run watch bench related list dev typecheck --version -v")),
    "vite": Tool(
        _words("build optimize preview dev serve --version -v --help"),
        _words("--host --port --mode -m --base --outDir --logLevel -l --config -c"),
    ),
    "next": Tool(
        _words("build lint info dev start --version telemetry"),
        _words("-p --port -H --hostname"),
        nested={"telemetry": _words("status disable --disable")},
    ),
    "biome": Tool(_words("check format lint ci version explain --version rage")),
    "golangci-lint": Tool(_words("run linters version help config fmt formatters --version")),
    "dotnet": Tool(
        _words(
            "build test run clean format pack publish --info --version --list-sdks --list-runtimes "
            "sln list watch msbuild vstest build-server help"
        )
    ),
    "swift": Tool(
        _words("build test run package --version -version"),
        nested={"package": _words("describe dump-package clean init show-dependencies reset")},
    ),
    "bazel": Tool(
        _words(
            "build test run query cquery aquery clean info version help coverage shutdown "
            "dump canonicalize-flags config print_action"
        )
    ),
    "zig": Tool(
        _words(
            "build test run fmt version env cc c++ ast-check init zen targets translate-c build-exe "
            "build-lib build-obj"
        )
    ),
    "meson": Tool(
        _words("setup compile test configure introspect dist init rewrite format fmt --version -v help")
    ),
    "turbo": Tool(_words("run build test lint --version")),
    # Rails on the workspace's own app and development database; `runner`, `console`, `credentials`,
    # `dbconsole` and unknown tasks ask.
    "rails": Tool(
        _words(
            """test test:system test:models test:controllers test:all spec routes about stats notes
            db:migrate db:rollback db:create db:prepare db:setup db:schema:load db:schema:dump db:seed
            db:migrate:status db:test:prepare db:version db:reset db:drop generate g destroy d server s
            assets:precompile assets:clobber zeitwerk:check middleware time:zones:all log:clear tmp:clear
            version --version -v -h --help help"""
        ),
        _words("-e --environment"),
    ),
    "mix": Tool(
        _words(
            """test format compile credo dialyzer docs help clean xref ecto.migrate ecto.create ecto.rollback
            ecto.reset ecto.setup ecto.gen.migration phx.routes phx.server phx.gen.html phx.gen.json
            phx.gen.context deps.tree deps.compile app.tree coveralls --version -v"""
        ),
        nested={},
    ),
    # `composer test`, `composer run-script lint`: the project's own composer.json scripts.
    "composer": Tool(
        _words(
            "test run-script run validate show dump-autoload dumpautoload check-platform-reqs "
            "licenses depends why why-not status diagnose --version -V help list lint fund"
        ),
        _words("-d --working-dir"),
        scripts=True,
        builtins=_words(
            "install update require remove create-project global self-update config "
            "outdated search browse archive exec publish upgrade audit reinstall bump"
        ),
    ),
    "nx": Tool(_words("run test build lint affected run-many graph show --version")),
}
# Spellings of the same program (wrappers checked into the repository run the same tool).
ALIASES = {"mvnw": "mvn", "gradlew": "gradle", "yarnpkg": "yarn", "py.test": "pytest"}

# `python -m MODULE`: modules that are a known tool (judged as that program) or plain stdlib work.
MODULE_PROGRAMS = {
    "pytest": "pytest", "mypy": "mypy", "ruff": "ruff", "black": "black", "isort": "isort",
    "flake8": "flake8", "pylint": "pylint", "pip": "pip", "coverage": "coverage", "tox": "tox",
    "nox": "nox", "pre_commit": "pre-commit", "pyright": "pyright", "bandit": "bandit",
    "pyflakes": "pyflakes", "pycodestyle": "pycodestyle", "pydocstyle": "pydocstyle",
    "mkdocs": "mkdocs", "sphinx": "sphinx-build", "twine": "twine", "poetry": "poetry",
    "hatch": "hatch", "pdm": "pdm", "uv": "uv", "build": "build", "awscli": "aws",
}  # fmt: skip
STDLIB_MODULES = _words(
    """
    py_compile compileall unittest venv json.tool doctest timeit cProfile profile pstats trace dis
    tokenize ast zipfile tarfile gzip calendar site sysconfig platform this pydoc_data tabnanny
    pickletools filecmp difflib uuid base64 quopri mimetypes locale sqlite3 pyclbr symtable
    """
)
