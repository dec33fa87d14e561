"""The option tables :mod:`protocol.calls.cmdline` reads commands with (data only).

Each :class:`~protocol.calls.cmdline.Spec` is the program's own list: git's from ``git <cmd>
--git-completion-helper-all`` and ``git <cmd> -h`` (git 2.39; newer options a table
lacks are treated as unknown, which the classifier and the policy take conservatively),
the GNU tools' from their ``--help`` and sources. ``tests/protocol/test_cmdtables.py``
runs the installed programs to prove that a prefix means here what it means there.

:data:`GIT_GLOBAL` is read by exact name only: git's own front end does not abbreviate.
"""

from __future__ import annotations

from protocol.calls.cmdline import Spec, spec

__all__ = ["GIT", "GIT_GLOBAL", "GIT_NESTED", "PROGRAMS"]

# git [global options] <command>: exact names; True when the option takes the next word
# as its value (``-C dir``, ``--git-dir dir``; ``--git-dir=dir`` too)
GIT_GLOBAL: dict[str, bool] = {
    "-C": True, "-c": True, "--config-env": True, "--exec-path": False, "--html-path": False,
    "--man-path": False, "--info-path": False, "-p": False, "--paginate": False, "-P": False,
    "--no-pager": False, "--no-replace-objects": False, "--bare": False, "--git-dir": True,
    "--work-tree": True, "--namespace": True, "--super-prefix": True, "--literal-pathspecs": False,
    "--glob-pathspecs": False, "--noglob-pathspecs": False, "--icase-pathspecs": False,
    "--no-optional-locks": False, "--shallow-file": True, "--list-cmds": False, "--attr-source": True,
    "-v": False, "--version": False, "-h": False, "--help": False, "--no-advice": False,
}

# commands whose first operand is a command of their own (``git stash push``); the first
# listed is the default when none is given
GIT_NESTED: dict[str, tuple[str, ...]] = {
    "stash": ("push", "save", "list", "show", "apply", "pop", "drop", "clear", "branch", "create", "store"),
    "reflog": ("show", "expire", "delete", "exists", "list"),
    "worktree": ("", "add", "list", "lock", "move", "prune", "remove", "repair", "unlock"),
    "remote": ("", "add", "rename", "rm", "remove", "set-head", "set-branches", "get-url", "set-url", "show",
               "prune", "update"),
    "notes": ("list", "add", "copy", "append", "edit", "show", "merge", "remove", "prune", "get-ref"),
    "submodule": ("status", "add", "init", "deinit", "update", "set-branch", "set-url", "summary", "foreach",
                  "sync", "absorbgitdirs"),
    "bisect": ("", "start", "bad", "good", "new", "old", "terms", "skip", "next", "reset", "visualize", "view",
               "replay", "log", "run", "help"),
    "sparse-checkout": ("", "list", "init", "set", "add", "reapply", "disable", "check-rules"),
    "maintenance": ("", "run", "start", "stop", "register", "unregister"),
}

_DIFF = ("patch no-patch unified=? function-context raw patch-with-raw patch-with-stat numstat shortstat dirstat=? "
         "cumulative dirstat-by-file=? check summary name-only name-status stat=? stat-width= stat-name-width= "
         "stat-graph-width= stat-count= compact-summary binary full-index color=? ws-error-highlight= abbrev=? "
         "src-prefix= dst-prefix= line-prefix= no-prefix inter-hunk-context= output-indicator-new= "
         "output-indicator-old= output-indicator-context= break-rewrites=? find-renames=? irreversible-delete "
         "find-copies=? find-copies-harder no-renames rename-empty follow minimal ignore-all-space "
         "ignore-space-change ignore-space-at-eol ignore-cr-at-eol ignore-blank-lines ignore-matching-lines= "
         "indent-heuristic patience histogram diff-algorithm= anchored= word-diff=? word-diff-regex= color-words=? "
         "color-moved=? color-moved-ws= relative=? text exit-code quiet ext-diff textconv ignore-submodules=? "
         "submodule=? ita-invisible-in-index ita-visible-in-index pickaxe-all pickaxe-regex rotate-to= skip-to= "
         "find-object= diff-filter= output= default-prefix")
_DIFF_SHORT = "z p u s R B:: M:: C:: l: O: S: G: U:: a=text b w W D"
_LOG = ("quiet source use-mailmap mailmap clear-decorations decorate-refs= decorate-refs-exclude= decorate=? "
        "max-count= skip= since= after= until= before= author= committer= grep= all-match invert-grep "
        "regexp-ignore-case basic-regexp extended-regexp fixed-strings perl-regexp merges no-merges min-parents= "
        "max-parents= first-parent all branches=? tags=? remotes=? glob= exclude= reflog walk-reflogs oneline "
        "pretty=? format= graph reverse date= relative-date name-only")

GIT: dict[str, Spec] = {
    "diff": spec(_DIFF + " cached staged merge-base no-index", _DIFF_SHORT, negatable=True),
    "log": spec(_DIFF + " " + _LOG, _DIFF_SHORT + " q=quiet L: n:=max-count i=regexp-ignore-case E F P g",
                negatable=True),
    "show": spec(_DIFF + " " + _LOG, _DIFF_SHORT + " q=quiet n:=max-count", negatable=True),
    "reset": spec("quiet no-refresh mixed soft hard merge keep recurse-submodules patch intent-to-add "
            "pathspec-from-file= pathspec-file-nul refresh",
         "q=quiet p=patch N=intent-to-add", negatable=True),
    "checkout": spec("guess overlay quiet recurse-submodules progress merge conflict= detach track force orphan= "
            "overwrite-ignore ignore-other-worktrees ours theirs patch ignore-skip-worktree-bits "
            "pathspec-from-file= pathspec-file-nul no-guess",
         "b: B: l q=quiet m=merge d=detach t=track f=force 2=ours 3=theirs p=patch", negatable=True),
    "switch": spec("create= force-create= guess discard-changes quiet recurse-submodules progress merge conflict= "
            "detach track force orphan= overwrite-ignore ignore-other-worktrees no-create",
         "c:=create C:=force-create q=quiet m=merge d=detach t=track f=force", negatable=True),
    "restore": spec("source= staged worktree ignore-unmerged overlay quiet recurse-submodules progress merge "
            "conflict= ours theirs patch ignore-skip-worktree-bits pathspec-from-file= pathspec-file-nul "
            "no-source",
         "s:=source S=staged W=worktree q=quiet m=merge 2=ours 3=theirs p=patch", negatable=True),
    "branch": spec("verbose quiet track set-upstream set-upstream-to= unset-upstream color remotes contains "
            "no-contains with without abbrev all delete move copy list show-current create-reflog "
            "edit-description force merged no-merged column sort= points-at= ignore-case recurse-submodules "
            "format=",
         "v=verbose q=quiet t=track u:=set-upstream-to r=remotes a=all d=delete D m=move M c=copy C l=list "
                 "f=force i=ignore-case", negatable=True),
    "tag": spec("list delete verify annotate message= file= edit sign cleanup= local-user= force create-reflog "
            "column contains no-contains with without merged no-merged sort= points-at format= color "
            "ignore-case",
         "l=list n:: d=delete v=verify a=annotate m:=message F:=file e=edit s=sign u:=local-user f=force "
                 "i=ignore-case", negatable=True),
    "clean": spec("quiet dry-run force interactive exclude= no-quiet",
         "q=quiet n=dry-run f=force i=interactive d e:=exclude x X", negatable=True),
    "commit": spec("quiet verbose file= author= date= message= reedit-message= reuse-message= fixup= squash= "
            "reset-author trailer= signoff template= edit cleanup= status gpg-sign all include interactive "
            "patch only no-verify dry-run short branch ahead-behind porcelain long null amend no-post-rewrite "
            "untracked-files pathspec-from-file= pathspec-file-nul allow-empty allow-empty-message verify "
            "post-rewrite",
         "q=quiet v=verbose F:=file m:=message c:=reedit-message C:=reuse-message s=signoff t:=template "
                 "e=edit S::=gpg-sign a=all i=include p=patch o=only n=no-verify z=null u::=untracked-files",
         negatable=True),
    "stash push": spec("keep-index staged patch quiet include-untracked all message= pathspec-from-file= "
            "pathspec-file-nul no-keep-index",
         "k=keep-index S=staged p=patch q=quiet u=include-untracked a=all m:=message", negatable=True),
    "stash save": spec("keep-index staged patch quiet include-untracked all message= no-keep-index",
         "k=keep-index S=staged p=patch q=quiet u=include-untracked a=all m:=message", negatable=True),
    "push": spec("verbose quiet repo= all mirror delete tags dry-run porcelain force force-with-lease "
            "force-if-includes recurse-submodules= thin receive-pack= exec= set-upstream progress prune "
            "no-verify follow-tags signed atomic push-option= ipv4 ipv6 verify",
         "v=verbose q=quiet d=delete n=dry-run f=force u=set-upstream o:=push-option 4=ipv4 6=ipv6", negatable=True),
    "fetch": spec("verbose quiet all set-upstream append atomic upload-pack= force multiple tags jobs= prefetch "
            "prune prune-tags recurse-submodules dry-run write-fetch-head keep update-head-ok progress depth= "
            "shallow-since= shallow-exclude= deepen= unshallow refetch submodule-prefix= "
            "recurse-submodules-default= update-shallow refmap= server-option= ipv4 ipv6 negotiation-tip= "
            "negotiate-only filter= auto-maintenance auto-gc show-forced-updates write-commit-graph stdin "
            "no-verbose",
         "v=verbose q=quiet a=append f=force m=multiple t=tags n j:=jobs p=prune P=prune-tags k=keep "
                 "u=update-head-ok o:=server-option 4=ipv4 6=ipv6", negatable=True),
    "pull": spec("verbose quiet progress recurse-submodules rebase stat summary log signoff squash commit edit "
            "cleanup= ff ff-only verify verify-signatures autostash strategy= strategy-option= gpg-sign "
            "allow-unrelated-histories all append upload-pack= force tags prune jobs dry-run keep depth= "
            "shallow-since= shallow-exclude= deepen= unshallow update-shallow refmap= server-option= ipv4 "
            "ipv6 negotiation-tip= show-forced-updates set-upstream no-verbose",
         "v=verbose q=quiet r=rebase n s:=strategy X:=strategy-option S::=gpg-sign a=append f=force t=tags "
                 "p=prune j::=jobs k=keep o:=server-option 4=ipv4 6=ipv6", negatable=True),
    "archive": spec("output= remote= exec= no-output format= prefix= add-file= add-virtual-file= "
                    "worktree-attributes verbose list mtime=",
         "o:=output v=verbose N l=list", negatable=True),
    "grep": spec("cached no-index untracked exclude-standard recurse-submodules invert-match ignore-case "
            "word-regexp text textconv recursive max-depth= extended-regexp basic-regexp fixed-strings "
            "perl-regexp line-number column full-name files-with-matches name-only files-without-match null "
            "only-matching count color break heading context= before-context= after-context= threads= "
            "show-function function-context and or not quiet all-match open-files-in-pager ext-grep "
            "max-count= index",
         "v=invert-match i=ignore-case w=word-regexp a=text I r=recursive E=extended-regexp G=basic-regexp "
                 "F=fixed-strings P=perl-regexp n=line-number h H l=files-with-matches L=files-without-match "
                 "z=null o=only-matching c=count C:=context B:=before-context A:=after-context N p=show-function "
                 "W=function-context f: e: q=quiet O::=open-files-in-pager m:=max-count", negatable=True),
    "gc": spec("quiet prune cruft aggressive auto force keep-largest-pack no-quiet",
         "q=quiet", negatable=True),
    "rm": spec("dry-run quiet cached force ignore-unmatch sparse pathspec-from-file= pathspec-file-nul no-dry-run",
         "n=dry-run q=quiet f=force r", negatable=True),
    "mv": spec("verbose dry-run force sparse no-verbose",
         "v=verbose n=dry-run f=force k", negatable=True),
    "add": spec("dry-run verbose interactive patch edit force update renormalize intent-to-add all ignore-removal "
            "refresh ignore-errors ignore-missing sparse chmod= warn-embedded-repo pathspec-from-file= "
            "pathspec-file-nul no-dry-run",
         "n=dry-run v=verbose i=interactive p=patch e=edit f=force u=update N=intent-to-add A=all", negatable=True),
    "apply": spec("exclude= include= no-add stat allow-binary-replacement binary numstat summary check index "
            "intent-to-add cached unsafe-paths apply 3way build-fake-ancestor= whitespace= "
            "ignore-space-change ignore-whitespace reverse unidiff-zero reject allow-overlap verbose quiet "
            "inaccurate-eof recount directory= allow-empty add",
         "p: N=intent-to-add 3=3way z C: R=reverse v=verbose q=quiet", negatable=True),
    "init": spec("template= bare shared quiet separate-git-dir= initial-branch= object-format= no-template",
         "q=quiet b:=initial-branch", negatable=True),
    "clone": spec("verbose quiet progress reject-shallow no-checkout bare naked mirror local no-hardlinks shared "
            "recurse-submodules recursive jobs= template= reference= reference-if-able= dissociate origin= "
            "branch= upload-pack= depth= shallow-since= shallow-exclude= single-branch no-tags "
            "shallow-submodules separate-git-dir= config= server-option= ipv4 ipv6 filter= "
            "also-filter-submodules remote-submodules sparse bundle-uri= checkout hardlinks tags",
         "v=verbose q=quiet n=no-checkout l=local s=shared j:=jobs o:=origin b:=branch u:=upload-pack "
                 "c:=config 4=ipv4 6=ipv6", negatable=True),
    "rebase": spec("onto= keep-base no-verify quiet verbose no-stat signoff committer-date-is-author-date "
            "reset-author-date ignore-date ignore-whitespace whitespace= force-rebase no-ff continue skip "
            "abort quit edit-todo show-current-patch apply merge interactive preserve-merges "
            "rerere-autoupdate empty= keep-empty autosquash update-refs gpg-sign autostash exec= "
            "allow-empty-message rebase-merges fork-point strategy= strategy-option= root "
            "reschedule-failed-exec reapply-cherry-picks verify stat ff",
         "q=quiet v=verbose n=no-stat C: f=force-rebase m=merge i=interactive S::=gpg-sign x:=exec "
                 "r::=rebase-merges s:=strategy X:=strategy-option", negatable=True),
    "merge": spec("stat summary log squash commit edit cleanup= ff ff-only rerere-autoupdate verify-signatures "
            "strategy= strategy-option= message= file into-name= verbose quiet abort quit continue "
            "allow-unrelated-histories progress gpg-sign autostash overwrite-ignore signoff no-verify verify",
         "n e=edit s:=strategy X:=strategy-option m:=message F:=file v=verbose q=quiet S::=gpg-sign", negatable=True),
    "cherry-pick": spec("quit continue abort skip cleanup= no-commit edit signoff mainline= rerere-autoupdate "
            "strategy= strategy-option= gpg-sign ff allow-empty allow-empty-message keep-redundant-commits commit",
         "n=no-commit e=edit s=signoff m:=mainline X:=strategy-option S::=gpg-sign x", negatable=True),
    "revert": spec("quit continue abort skip cleanup= no-commit edit signoff mainline= rerere-autoupdate strategy= "
            "strategy-option= gpg-sign reference commit",
         "n=no-commit e=edit s=signoff m:=mainline X:=strategy-option S::=gpg-sign", negatable=True),
    "reflog expire": spec("dry-run rewrite updateref verbose expire= expire-unreachable= stale-fix all single-worktree "
            "no-dry-run",
         "", negatable=True),
    "worktree add": spec("force detach checkout lock reason= quiet track guess-remote no-force",
         "f=force b: B: d=detach q=quiet", negatable=True),
    "format-patch": spec("numbered no-numbered signoff stdout cover-letter numbered-files suffix= start-number= "
            "reroll-count= filename-max-length= rfc cover-from-description= subject-prefix= output-directory= "
            "keep-subject no-binary zero-commit ignore-if-in-upstream no-stat add-header= to= cc= from "
            "in-reply-to= attach inline thread signature= base= signature-file= quiet progress interdiff= "
            "range-diff= creation-factor= force-in-body-from binary",
         "n=numbered N=no-numbered s=signoff v:=reroll-count o:=output-directory k=keep-subject p=no-stat "
                 "q=quiet", negatable=True),
    "symbolic-ref": spec("quiet delete short recurse no-quiet",
         "q=quiet d=delete m:", negatable=True),
    "update-ref": spec("no-deref stdin create-reflog deref",
         "m: d z", negatable=True),
    "status": spec("verbose short branch show-stash ahead-behind porcelain long null untracked-files ignored "
            "ignore-submodules column no-renames find-renames renames",
         "v=verbose s=short b=branch z=null u::=untracked-files M::=find-renames", negatable=True),
    "stash apply": spec("quiet index no-quiet",
         "q=quiet", negatable=True),
    "stash show": spec("include-untracked only-untracked no-include-untracked",
         "u=include-untracked", negatable=True),
    "worktree list": spec("porcelain verbose expire= no-porcelain",
         "v=verbose z", negatable=True),
    "remote add": spec("fetch tags track= master= mirror= no-fetch",
         "f=fetch t:=track m:=master", negatable=True),
    "notes add": spec("message= file= reedit-message= reuse-message= allow-empty force no-allow-empty",
         "m:=message F:=file c:=reedit-message C:=reuse-message f=force", negatable=True),
    "prune": spec("dry-run verbose progress expire= exclude-promisor-objects no-dry-run",
         "n=dry-run v=verbose", negatable=True),
}
GIT["whatchanged"] = GIT["log"]
GIT["stash pop"] = GIT["stash apply"]

_COREUTILS = "help version"

PROGRAMS: dict[str, Spec] = {
    "cp": spec("archive attributes-only backup=? copy-contents no-dereference force interactive link dereference "
               "no-clobber preserve=? no-preserve= parents recursive reflink=? remove-destination sparse= "
               "strip-trailing-slashes symbolic-link suffix= target-directory= no-target-directory update=? "
               "verbose one-file-system context=? debug " + _COREUTILS,
               "a=archive b=backup d f=force i=interactive H l=link L=dereference n=no-clobber P=no-dereference p "
                       "R=recursive "
               "r=recursive s=symbolic-link S:=suffix t:=target-directory T=no-target-directory u v=verbose "
               "x=one-file-system Z"),
    "mv": spec("backup=? force interactive no-clobber no-copy strip-trailing-slashes suffix= target-directory= "
               "no-target-directory update=? verbose context debug exchange " + _COREUTILS,
               "b f=force i=interactive n=no-clobber S:=suffix t:=target-directory T=no-target-directory u "
                       "v=verbose Z"),
    "rm": spec("force interactive=? one-file-system no-preserve-root preserve-root=? recursive dir verbose "
               + _COREUTILS, "f=force i I r=recursive R=recursive d=dir v=verbose"),
    "sort": spec("ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting "
                 "month-sort human-numeric-sort numeric-sort random-sort random-source= reverse sort= version-sort "
                 "batch-size= check=? compress-program= debug files0-from= key= merge output= stable buffer-size= "
                 "field-separator= temporary-directory= parallel= unique zero-terminated " + _COREUTILS,
                 "b d f g i M h n R r V c C k:=key m=merge o:=output s=stable S:=buffer-size t:=field-separator "
                 "T:=temporary-directory u=unique z=zero-terminated y::"),
    "uniq": spec("count repeated all-repeated=? skip-fields= group=? ignore-case skip-chars= unique "
                 "zero-terminated check-chars= " + _COREUTILS,
                 "c=count d=repeated D f:=skip-fields i=ignore-case s:=skip-chars u=unique z=zero-terminated "
                 "w:=check-chars"),
    "touch": spec("no-create date= no-dereference reference= time= " + _COREUTILS,
                  "a c=no-create d:=date f h=no-dereference m r:=reference t:"),
    "mkdir": spec("mode= parents verbose context=? " + _COREUTILS, "m:=mode p=parents v=verbose Z"),
    "sed": spec("quiet silent debug expression= file= follow-symlinks in-place=? line-length= posix "
                "regexp-extended separate sandbox unbuffered null-data zero-terminated binary " + _COREUTILS,
                "n=quiet e:=expression f:=file i::=in-place l:=line-length E=regexp-extended r=regexp-extended "
                "s=separate u=unbuffered z=null-data b=binary"),
    # gawk (whose getopt_long abbreviates), mawk's -W; awk stops at the program text
    "awk": spec("assign= field-separator= file= bignum characters-as-bytes copyright csv debug=? dump-variables=? "
                "exec= gen-pot help include= lint=? load= no-optimize non-decimal-data optimize posix "
                "pretty-print=? profile=? re-interval sandbox source= traditional use-lc-numeric version",
                "f:=file v:=assign F:=field-separator b c C d::=dump-variables D::=debug e:=source E:=exec g h "
                "i:=include I k l:=load L::=lint M n N o::=pretty-print O p::=profile P r s S t V W:",
                permute=False),
    "tar": spec('absolute-names acls add-file= after-date= anchored append atime-preserve=? auto-compress '
            'backup=? block-number blocking-factor= bzip2 catenate check-device check-links checkpoint=? '
            'checkpoint-action= clamp-mtime compare compress concatenate confirmation create '
            'delay-directory-restore delete dereference diff directory= exclude-backups exclude-caches '
            'exclude-caches-all exclude-caches-under exclude-from= exclude-ignore-recursive= exclude-ignore= '
            'exclude-tag-all= exclude-tag-under= exclude-tag= exclude-vcs exclude-vcs-ignores exclude= '
            'extract file= files-from= force-local format= full-time get group-map= group= gunzip gzip '
            'hard-dereference help hole-detection= ignore-case ignore-command-error ignore-failed-read '
            'ignore-zeros incremental index-file= info-script= interactive keep-directory-symlink '
            'keep-newer-files keep-old-files label= level= list listed-incremental= lzip lzma lzop mode= '
            'mtime= multi-volume new-volume-script= newer-mtime= newer= no-acls no-anchored no-auto-compress '
            'no-check-device no-delay-directory-restore no-ignore-case no-ignore-command-error no-null '
            'no-overwrite-dir no-quote-chars= no-recursion no-same-owner no-same-permissions no-seek '
            'no-selinux no-unquote no-verbatim-files-from no-wildcards no-wildcards-match-slash no-xattrs '
            'null numeric-owner occurrence=? old-archive one-file-system one-top-level=? overwrite '
            'overwrite-dir owner-map= owner= pax-option= portability posix preserve preserve-order '
            'preserve-permissions quote-chars= quoting-style= read-full-records record-size= recursion '
            'recursive-unlink remove-files restrict rmt-command= rsh-command= same-order same-owner '
            'same-permissions seek selinux show-defaults show-omitted-dirs show-snapshot-field-ranges '
            'show-stored-names show-transformed-names skip-old-files sort= sparse sparse-version= '
            'starting-file= strip-components= suffix= tape-length= test-label to-command= to-stdout totals=? '
            'touch transform= uncompress ungzip unlink-first unquote update usage use-compress-program= utc '
            'verbatim-files-from verbose verify version volno-file= warning= wildcards wildcards-match-slash '
            'xattrs xattrs-exclude= xattrs-include= xform= xz zstd',
                "A=catenate c=create d=diff r=append t=list u=update x=extract g:=listed-incremental G=incremental "
                "S=sparse C:=directory T:=files-from X:=exclude-from k=keep-old-files U=unlink-first W=verify "
                "O=to-stdout m=touch p=preserve-permissions s=preserve-order f:=file F:=info-script L:=tape-length "
                "M=multi-volume b:=blocking-factor B=read-full-records i=ignore-zeros H:=format V:=label "
                "a=auto-compress I:=use-compress-program j=bzip2 J=xz z=gzip Z=compress h=dereference "
                "K:=starting-file N:=newer P=absolute-names l=check-links v=verbose w=interactive R=block-number "
                "n=seek o"),
    "rg": spec('after-context= before-context= binary block-buffered byte-offset case-sensitive color= colors= '
            'column context= context-separator= count count-matches crlf debug dfa-size-limit= encoding= '
            'engine= field-context-separator= field-match-separator= files files-with-matches '
            'files-without-match fixed-strings follow glob= glob-case-insensitive heading hidden '
            'hostname-bin= hyperlink-format= iglob= ignore-case ignore-file= ignore-file-case-insensitive '
            'include-zero invert-match json line-buffered line-number line-regexp max-columns= '
            'max-columns-preview max-count= max-depth= max-filesize= mmap multiline multiline-dotall '
            'no-config no-filename no-heading no-ignore no-ignore-dot no-ignore-exclude no-ignore-files '
            'no-ignore-global no-ignore-messages no-ignore-parent no-ignore-vcs no-line-number no-messages '
            'no-mmap no-pcre2-unicode no-require-git no-unicode null null-data one-file-system only-matching '
            'passthru path-separator= pcre2 pcre2-version pre= pre-glob= pretty quiet regex-size-limit= '
            'regexp= replace= search-zip smart-case sort= sortr= stats stop-on-nonmatch text threads= trim '
            'type= type-add= type-clear= type-list type-not= unrestricted vimgrep with-filename word-regexp '
            'no-search-zip help version file=', "A: B: C: E: M: T: d: e: f: g: j: m: r: t: z=search-zip"),
    "make": spec("always-make directory= debug=? environment-overrides eval= file= makefile= help ignore-errors "
                 "include-dir= jobs=? keep-going load-average=? check-symlink-times just-print dry-run recon old-file= "
                 "assume-old= output-sync=? print-data-base question no-builtin-rules no-builtin-variables shuffle=? "
                 "silent quiet no-silent stop no-keep-going touch trace version print-directory no-print-directory "
                 "what-if= new-file= assume-new= warn-undefined-variables",
                 "B C:=directory d E:=eval e=environment-overrides f:=file h i I:=include-dir j::=jobs k "
                 "l::=load-average L n=just-print o:=old-file O::=output-sync p q r R s=silent S t v w W:=what-if"),
    "file": spec("compile brief checking-printout exclude= exclude-quiet= extension files-from= "
                 "separator= mime mime-type mime-encoding keep-going list dereference magic-file= "
                 "no-dereference no-buffer no-pad print0 preserve-date parameter= raw special-files "
                 "uncompress uncompress-noreport null" + " " + _COREUTILS,
                 "b=brief C=compile c=checking-printout e:=exclude E f:=files-from F:=separator i=mime k=keep-going "
                 "l=list L=dereference m:=magic-file h=no-dereference n=no-buffer N=no-pad 0=print0 "
                 "p=preserve-date P:=parameter r=raw s=special-files S z=uncompress Z=uncompress-noreport v=version"),
}
